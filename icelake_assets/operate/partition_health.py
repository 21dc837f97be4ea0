"""``icelake health TABLE --partitions``: the unhealthy partitions of one table, by the Dagster
partition key a backfill selects, with their failing checks and numbers (planning/partition_health.py
grades them); ``--json`` prints ``icelake.partition_health/v1``, the document the MCP read tool
``partition_health`` returns too."""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from typing import Any

from pyiceberg.catalog import Catalog

from icelake_assets.catalog.connection import load_table, open_catalog
from icelake_assets.health.cache import ManifestCache, default_cache_path
from icelake_assets.health.findings import Finding
from icelake_assets.health.overview import TableHealth
from icelake_assets.health.stats import compute_table_stats
from icelake_assets.partitions.keys import dimension_name
from icelake_assets.partitions.layout import partition_layout
from icelake_assets.planning.partition_health import PartitionHealth, PartitionReport, partition_health
from icelake_assets.policies import policy_for
from icelake_assets.settings import Settings
from icelake_assets.text import format_table
from icelake_assets.types import TableRef

PARTITION_HEALTH_SCHEMA = "icelake.partition_health/v1"
DEFAULT_TOP = 20  # the worst partitions per check (`icelake health --top`'s default)


def read_partition_health(
    settings: Settings,
    ref: TableRef,
    catalog: Catalog | None = None,
    cache: ManifestCache | None = None,
    top: int = DEFAULT_TOP,
) -> tuple[PartitionReport, tuple[str, ...], int | None]:
    """The table's partition report (named ``str(ref)``), its Dagster dimension names and the
    snapshot it was read at, from metadata alone (the manifest cache: repeated reads are free)."""
    catalog = catalog if catalog is not None else open_catalog(settings, ref.catalog)
    table = load_table(catalog, ref)
    policy = policy_for(settings, ref, table.properties)
    cache = cache if cache is not None else ManifestCache(path=default_cache_path())
    stats = compute_table_stats(table, policy, cache)
    layout = partition_layout(table, with_earliest=False)
    report = replace(partition_health(stats, policy, layout, top), table=str(ref))
    return report, tuple(dimension_name(d) for d in layout.dimensions), stats.current_snapshot_id


def unhealthy_partition_count(catalog: Catalog, ref: TableRef, health: TableHealth) -> int | None:
    """The table's partitions failing a check per partition (None: unpartitioned), graded from the
    statistics ``health`` was judged on, as the UI's overview counts them (`icelake health
    --overview`, the MCP tool ``lake_overview``)."""
    layout = partition_layout(load_table(catalog, ref), with_earliest=False)
    report = partition_health(health.stats, health.policy, layout)
    return len(report.unhealthy) if report.partitioned else None


def _finding_json(f: Finding) -> dict[str, Any]:
    return {
        "check": f.check,
        "severity": f.severity.value,
        "summary": f.summary,
        "recommendation": f.recommendation,
        "metrics": dict(f.metrics),
    }


def _partition_json(p: PartitionHealth) -> dict[str, Any]:
    return {
        "key": p.key,
        "labels": list(p.labels),
        "severity": p.severity.value,
        "failing": [_finding_json(f) for f in p.failing],
    }


def partition_health_json(
    report: PartitionReport, dimensions: tuple[str, ...], snapshot_id: int | None
) -> dict[str, Any]:
    """``icelake.partition_health/v1``: per check the failing partitions' count and the worst ones;
    every unhealthy partition (key None: no Dagster partition holds it, a whole-table run does) with
    its failing findings and their numbers, worst first."""
    unhealthy = sorted(
        report.unhealthy, key=lambda p: (-p.severity.rank, p.key is None, p.key or "", p.labels)
    )
    return {
        "schema": PARTITION_HEALTH_SCHEMA,
        "table": report.table,
        "snapshot_id": snapshot_id,
        "partitioned": report.partitioned,
        "dimensions": list(dimensions),
        "partitions_evaluated": len(report.partitions),
        "unhealthy_partitions": len(unhealthy),
        "checks": [
            {
                "check": c.check,
                "failing_partitions": c.failing,
                "worst": [
                    {
                        "key": o.key,
                        "labels": list(o.labels),
                        "severity": o.severity.value,
                        "over_threshold": o.over,
                    }
                    for o in c.worst
                ],
            }
            for c in report.checks
        ],
        "partitions": [_partition_json(p) for p in unhealthy],
    }


_SHOWN = {  # the numbers a row shows per failing check
    "small_files": ("data_files", "small_files", "avg_file_bytes"),
    "delete_files": ("delete_files", "delete_records", "data_files"),
    "layout_drift": ("drift_files", "data_files"),
}


def print_partition_health(report: PartitionReport) -> None:
    if not report.partitioned:
        print(f"{report.table} is not partitioned: no partition findings")
        return
    print(
        format_table(
            ("check", "failing partitions", "worst (times its threshold)"),
            [
                (c.check, c.failing, ", ".join(f"{o.key or o.labels[0]} ({o.over:g}x)" for o in c.worst[:3]))
                for c in report.checks
            ],
        )
    )
    print()
    unhealthy = report.unhealthy
    if not unhealthy:
        print(f"all {len(report.partitions)} partitions of {report.table} are healthy")
        return
    rows = [
        (
            p.key if p.key is not None else f"(no key) {p.labels[0]}",
            f.check,
            f.severity.value,
            ", ".join(f"{k}={f.metrics[k]}" for k in _SHOWN.get(f.check, ()) if k in f.metrics),
            f.summary,
        )
        for p in unhealthy
        for f in p.failing
    ]
    print(format_table(("partition", "check", "severity", "numbers", "finding"), rows))
    print(f"\n{len(unhealthy)} of {len(report.partitions)} partitions of {report.table} are unhealthy")


def cmd_partition_health(args: argparse.Namespace) -> int:
    """Exit status 0, or 1 with ``--fail-on`` when a partition's finding reaches that severity."""
    from icelake_assets.operate.commands import emit_json
    from icelake_assets.operate.names import parse_table
    from icelake_assets.settings import load_settings
    from icelake_assets.settings.asset_keys import use_asset_keys

    if not args.table:
        print("icelake: error: --partitions needs a TABLE", file=sys.stderr)
        return 2
    settings = load_settings(args.config)
    use_asset_keys(settings.asset_keys)
    report, dimensions, snapshot_id = read_partition_health(
        settings, parse_table(args.table, settings), top=args.top
    )
    if args.json:
        emit_json(partition_health_json(report, dimensions, snapshot_id))
    else:
        print_partition_health(report)
    if args.fail_on:
        level = {"warn": 1, "error": 2}[args.fail_on]
        if any(p.severity.rank >= level for p in report.partitions):
            return 1
    return 0
