"""``icelake layout ingest [FILE ...]``: scan reports into the scan reports table by hand
(audit/scan_reports.py). No FILE: one ingest of ``scan_reports.dir``, as the sensor does. FILEs: reports
kept elsewhere, e.g. by a REST catalog server (``ReportMetricsRequest`` bodies), each file a report, a
JSON array or JSON lines of them; ``-`` reads standard input. A file is known by its name and digest,
so loading the same file again adds nothing."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:  # `icelake --help` imports this module: pyiceberg and pyarrow load when a command runs
    from icelake_assets.audit.scan_reports import IngestResult
    from icelake_assets.settings import Settings

INGEST_SCHEMA = "icelake.layout.ingest/v1"


def ingest_inputs(
    settings: Settings, files: Sequence[str], stdin: IO[bytes] | None = None, now: float | None = None
) -> IngestResult:
    """What ``icelake layout ingest`` does; every input is read before anything is appended, and one
    that does not parse appends nothing (the error names it and the line or report)."""
    from icelake_assets.audit.scan_reports import (
        ScanReportStore,
        content_source,
        ingest_dir,
        ingest_documents,
    )

    if not files:
        return ingest_dir(settings, now=now)
    inputs: list[tuple[str, bytes, float | None]] = []
    for name in files:
        if name == "-":
            content = (stdin or sys.stdin.buffer).read()
            inputs.append((content_source("stdin", content), content, None))
        else:
            path = Path(name).resolve()
            content = path.read_bytes()
            inputs.append((content_source(str(path), content), content, path.stat().st_mtime))
    return ingest_documents(ScanReportStore.from_settings(settings), inputs, now)


def ingest_json(result: IngestResult) -> dict[str, Any]:
    return {"schema": INGEST_SCHEMA, **result.to_json()}


def cmd_layout_ingest(args: argparse.Namespace) -> int:
    from icelake_assets.operate.commands import emit_json
    from icelake_assets.settings import load_settings

    result = ingest_inputs(load_settings(args.config), args.files)
    if args.json:
        emit_json(ingest_json(result))
        return 0
    print(
        f"{result.reports} reports from {result.files} "
        f"{'inputs' if args.files else 'files'} into {result.table}"
        f" ({result.skipped_duplicates} already ingested, {result.rejected} rejected)"
    )
    return 0


def add_layout_command(sub: Any) -> None:
    """``icelake layout``: its sub-commands, ``ingest`` and ``show TABLE`` (operate/layout_view.py: the
    table's mined reports and the layout chosen by replaying them)."""
    layout = sub.add_parser(
        "layout", help="scan reports: ingest them, or show a table's usage and chosen layout"
    )
    commands = layout.add_subparsers(dest="layout_command", required=True)
    p = commands.add_parser("ingest", help="ingest scan reports: scan_reports.dir, or FILEs / - (stdin)")
    p.add_argument(
        "files",
        nargs="*",
        metavar="FILE",
        help="ScanReportParser JSON or ReportMetricsRequest bodies: one per file, a JSON array or JSON lines",
    )
    p.add_argument("--json", action="store_true", help=f"print the counts as JSON ({INGEST_SCHEMA})")
    p.set_defaults(func=cmd_layout_ingest)
    from icelake_assets.operate.layout_apply import add_layout_apply
    from icelake_assets.operate.layout_view import add_layout_show

    add_layout_show(commands)  # icelake layout show TABLE [--json]
    add_layout_apply(commands)  # icelake layout apply TABLE [--keys] [--force] [--json]
