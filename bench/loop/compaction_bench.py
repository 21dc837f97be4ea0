"""Closed-loop benchmark: a table of many small files compacted with partial progress, through one
real Dagster maintenance run on real Spark (issue 11: "a 20,000-file table compacted with partial
progress ends with its manifests rewritten").

    python -m bench.loop.compaction_bench             # 20,000 files in 40 day-partitions
    python -m bench.loop.compaction_bench --files 4000 --days 40

The table is written by Spark in one commit (``repartition`` + a fanout write: files = tasks x
days). The policy flags a day with more than 20 files; partial progress is on past 10 groups with at
most 10 commits. Printed: the time to write, the run's duration, files / snapshots / manifests
before and after, the run's snapshots added and its outcome. Exits 1 when the run did not end with
one file per day, its manifests rewritten and an effective outcome.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import yaml
from dagster import DagsterInstance

from icelake_assets.catalog.connection import TableRef, open_catalog
from icelake_assets.demo.many_files import write_many_files
from icelake_assets.health.stats import compute_table_stats
from icelake_assets.maintenance.spark.session import spark_config
from icelake_assets.orchestration.project import build_definitions, execute_maintenance
from icelake_assets.orchestration.resources import IcebergSparkResource
from icelake_assets.settings import load_settings

# A day with more than 20 files is compacted; partial progress past 10 groups, at most 10 commits.
THRESHOLDS = {
    "mode": "enforce",
    "guards": {"quiet_period_minutes": 0},
    "small_files": {
        "max_files_per_partition": 20,
        "partial_progress_min_groups": 10,
        "partial_progress_max_commits": 10,
    },
}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--files", type=int, default=20_000)
    parser.add_argument("--days", type=int, default=40)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="loop_bench_"))
    (root / "lake" / "warehouse").mkdir(parents=True)
    config = root / "icelake.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "catalogs": {
                    "bench": {
                        "type": "sql",
                        "uri": f"sqlite:///{root}/lake/catalog.db",
                        "warehouse": f"{root}/lake/warehouse",
                    }
                },
                "thresholds": THRESHOLDS,
            }
        )
    )
    settings = load_settings(config)
    ref = TableRef("bench", ("ns",), "many")
    cat = open_catalog(settings, "bench", create=True)
    cat.create_namespace("ns")
    spark = IcebergSparkResource(spark_config=spark_config(settings)).spark_session
    started = time.perf_counter()
    write_many_files(spark, ref, args.files, args.days)
    written = time.perf_counter() - started
    table = cat.load_table(("ns", "many"))
    before = compute_table_stats(table, settings.thresholds)
    instance = DagsterInstance.ephemeral()
    started = time.perf_counter()
    results = execute_maintenance(build_definitions(settings), instance, raise_on_error=True)
    run_s = time.perf_counter() - started
    table.refresh()
    after = compute_table_stats(table, settings.thresholds)
    md = next(e for r in results for e in r.get_asset_materialization_events()).materialization.metadata
    rows = [
        ("data files", before.data_files, after.data_files),
        ("snapshots", before.snapshots, after.snapshots),
        ("manifests", before.manifests, after.manifests),
    ]
    print(f"| {args.files} files, {args.days} days | before | after |\n|---|---|---|")
    for name, b, a in rows:
        print(f"| {name} | {b} | {a} |")
    print(f"| write (s) | {written:.1f} | |\n| maintenance run (s) | | {run_s:.1f} |")
    print(
        f"| run snapshots added (bound) | | {md['snapshots/added'].value} "
        f"({md['snapshots/max_added'].value}) |"
    )
    print(f"| rewrite_manifests | | {md['why/manifests'].value} |")
    print(f"| outcome | | {md['outcome'].value} |")
    ok = (
        after.data_files == args.days
        and "rewrite_manifests" in md["ops/acted"].value
        and md["outcome"].value == "effective"
    )
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
