"""A long rewrite says what it committed so far while Spark works (issue 25, item 5): real Spark,
a real partitioned table whose rewrite commits group by group (partial progress)."""

from __future__ import annotations

import threading

from icelake_assets.catalog.connection import TableRef, open_catalog
from icelake_assets.demo.lake import TRIPS_SCHEMA, TRIPS_SPEC, degrade_trips
from icelake_assets.health.cache import ManifestCache
from icelake_assets.health.stats import compute_table_stats
from icelake_assets.maintenance.ops import rewrite
from icelake_assets.maintenance.ops.progress import progress_since
from icelake_assets.policies import policy_for
from icelake_assets_tests.conftest import TEST_THRESHOLDS, catalog_name


def test_a_partial_progress_rewrite_reports_its_commits_while_it_runs(make_lake, spark_for):
    thresholds = {
        **TEST_THRESHOLDS,
        "small_files": {"max_files_per_partition": 4, "partial_progress_max_commits": 10},
    }
    settings = make_lake(thresholds=thresholds)
    name = catalog_name(settings)
    cat = open_catalog(settings, name, create=True)
    cat.create_namespace("ns")
    table = cat.create_table(("ns", "trips"), schema=TRIPS_SCHEMA, partition_spec=TRIPS_SPEC)
    degrade_trips(table, days=12, commits=8, rows_per_commit=24, seed=3)
    ref = TableRef(name, ("ns",), "trips")
    policy = policy_for(settings, ref, table.properties)
    start = table.current_snapshot().snapshot_id
    said: list[str] = []
    lock = threading.Lock()

    def say(text: str) -> None:
        with lock:
            said.append(text)

    cache = ManifestCache()
    outcome = rewrite.rewrite_data_files(
        lambda: spark_for(settings),
        ref,
        table,
        policy,
        lambda t: compute_table_stats(t, policy, cache),
        say=say,
        progress_every_s=0.2,
    )
    assert outcome.acted and (outcome.snapshots_committed or 0) >= 2
    assert said and all(s.startswith("rewrite in progress") for s in said)
    assert any("commits so far" in s for s in said)
    # what the watcher reads is what the rewrite committed
    final = progress_since(table, start, 0.0)
    assert final.commits == outcome.snapshots_committed
    assert final.files_rewritten == outcome.rewritten_data_files_count
