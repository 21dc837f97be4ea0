"""``icelake layout show TABLE [--json]`` (icelake.layout/v1) and the MCP read tool ``layout_usage``: how
the table's recorded scans filter it (layout/mining.py) and the layout the replay would choose
(layout/replay.py, layout/choice.py). Reports come from an iterable (tests, a Dagster check) or, for the
command, from the ``icelake.scan_reports`` table (:func:`load_reports`)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from icelake_assets.audit.scan_report_reads import load_reports
from icelake_assets.layout.effect import LayoutEffect
from icelake_assets.layout.table_choice import LayoutReport, layout_report
from icelake_assets.text import format_table

LAYOUT_SCHEMA = "icelake.layout/v1"
TOP_SHAPES = 10


def layout_json(report: LayoutReport) -> dict[str, Any]:
    usage, choice, replay = report.usage, report.choice, report.replay
    calibration = replay.calibration
    return {
        "schema": LAYOUT_SCHEMA,
        "table": report.table,
        "reports": usage.reports,
        "unfiltered": usage.unfiltered,
        "unparsed": usage.unparsed,
        "measured_skipped_ratio": round(usage.measured_skipped_ratio, 4),
        "columns": [
            {
                "column": c.column,
                "scans": c.scans,
                "kinds": {str(k.kind): k.scans for k in c.kinds},
                "bytes_read": c.bytes_read,
                "skipped_ratio": round(c.skipped_ratio, 4),
                "transforms": list(c.transforms),
            }
            for c in usage.columns
        ],
        "projected": [{"column": p.column, "scans": p.scans} for p in usage.projected],
        "queries": [
            {
                "filter": s.text,
                "scans": s.scans,
                "bytes_read": s.bytes_read,
                "skipped_ratio": round(s.skipped_ratio, 4),
            }
            for s in usage.top_shapes(TOP_SHAPES)
        ],
        "candidates": [
            {
                "layout": p.candidate.name,
                "strategy": p.candidate.strategy,
                "keys": list(p.candidate.keys),
                "fraction_read": round(p.fraction_read, 4),
                "files_read": round(p.files_read, 2),
                "bytes_skipped": round(p.bytes_skipped),
            }
            for p in replay.predictions
        ],
        "sample_rows": replay.sample_rows,
        "calibration": None
        if calibration is None
        else {
            "predicted_skipped": round(calibration.predicted_skipped, 4),
            "measured_skipped": round(calibration.measured_skipped, 4),
        },
        "choice": {
            "recommend": choice.recommend,
            "reason": choice.reason,
            "old_keys": list(choice.old_keys),
            "new_keys": list(choice.new_keys),
            "strategy": choice.strategy,
            "files_read_before": round(choice.files_read_before, 2),
            "files_read_after": round(choice.files_read_after, 2),
            "predicted_gain": round(choice.predicted_gain, 4),
            "bytes_saved_per_window": round(choice.bytes_saved_per_window),
            "rewrite_bytes": choice.rewrite_bytes,
            "reports_used": choice.reports_used,
        },
        "last_change": None if report.effect is None else effect_json(report.effect),
    }


def effect_json(effect: LayoutEffect) -> dict[str, Any]:
    """The last change's effect: per filter form and in all, predicted against measured."""
    return {
        "measured": effect.measured,
        "skipped_before": effect.skipped_before,
        "skipped_after": effect.skipped_after,
        "predicted_skipped": effect.predicted_skipped,
        "prediction_held": effect.prediction_held,
        "helped": effect.helped,
        "verdict": effect.verdict,
        "forms": [
            {
                "form": f.form,
                "scans_before": f.scans_before,
                "scans_after": f.scans_after,
                "skipped_before": round(f.skipped_before, 4),
                "skipped_after": round(f.skipped_after, 4),
            }
            for f in effect.forms
        ],
    }


def format_layout(report: LayoutReport) -> str:
    usage, choice = report.usage, report.choice
    out = [
        f"{report.table}: {usage.reports} scan reports ({usage.unfiltered} unfiltered), "
        f"{usage.measured_skipped_ratio:.0%} of listed files skipped"
    ]
    if usage.columns:
        rows: list[tuple[object, ...]] = [
            (
                c.column,
                c.scans,
                ", ".join(f"{k.kind} {k.scans}" for k in c.kinds),
                f"{c.bytes_read:,}",
                f"{c.skipped_ratio:.0%}",
            )
            for c in usage.columns
        ]
        out += ["", format_table(("column", "scans", "how", "bytes read", "skipped"), rows)]
    if usage.shapes:
        rows = [
            (s.text, s.scans, f"{s.bytes_read:,}", f"{s.skipped_ratio:.0%}")
            for s in usage.top_shapes(TOP_SHAPES)
        ]
        out += ["", format_table(("query filter", "scans", "bytes read", "skipped"), rows)]
    if report.replay.predictions:
        rows = [
            (p.candidate.name, f"{p.files_read:.1f}", f"{p.skipped_fraction:.0%}")
            for p in report.replay.predictions
        ]
        out += ["", format_table(("layout", "files read per query", "skipped"), rows)]
    if report.effect is not None:
        out += ["", f"last layout change: {report.effect.verdict}"]
    verdict = "recommend" if choice.recommend else "keep the layout"
    out += ["", f"{verdict}: {choice.reason}"]
    return "\n".join(out)


def cmd_layout_show(args: argparse.Namespace) -> int:
    from icelake_assets.operate.commands import emit_json
    from icelake_assets.operate.names import parse_table
    from icelake_assets.settings import load_settings

    settings = load_settings(args.config)
    ref = parse_table(args.table, settings)
    reports = load_reports(settings, ref)
    if not reports:
        print(f"icelake: no scan reports of {ref} yet (scan_reports in docs/layout.md)", file=sys.stderr)
    report = layout_report(settings, ref, reports)
    if args.json:
        emit_json(layout_json(report))
    else:
        print(format_layout(report))
    return 0


def add_layout_show(commands: Any) -> None:
    """``show TABLE [--json]`` under the ``icelake layout`` sub-commands (operate/scan_reports.py)."""
    p = commands.add_parser(
        "show", help="a table's filtered columns from its scan reports, and the layout chosen"
    )
    p.add_argument("table", help="catalog.namespace.table (or namespace.table)")
    p.add_argument("--json", action="store_true", help=f"print it as JSON ({LAYOUT_SCHEMA})")
    p.set_defaults(func=cmd_layout_show)


__all__ = ["LayoutReport", "layout_report", "load_reports"]  # what the command and MCP tool read
