"""Layout from real queries, end to end (issue 52) on real Spark through Dagster: Spark's scans of a
table written in arrival order report through the product's reporter; the reports are ingested once
(audit/test_scan_reports.py crashes an ingest between its append and the files' removal); the product proposes sorting
by the filtered column with a predicted gain; approved, the table's sort order is set, the maintenance
sensor's rewrite sorts the files, and the next scans skip what the prediction said."""

from __future__ import annotations

import random

import pyarrow as pa
import pytest
from dagster import DagsterInstance

from icelake_assets.audit.scan_report_reads import load_reports
from icelake_assets.audit.scan_reports import ScanReportStore, ingest_dir
from icelake_assets.catalog.connection import TableRef, open_catalog
from icelake_assets.health.stats import compute_table_stats
from icelake_assets.layout.table_choice import layout_report
from icelake_assets.layout.table_layout import sort_keys
from icelake_assets.maintenance.spark.procedures import table_identifier
from icelake_assets.orchestration.checks.layout_checks import apply_layout
from icelake_assets_tests.conftest import TEST_THRESHOLDS, catalog_name
from icelake_assets_tests.orchestration.sensor_runs import maintain

VENDORS = [f"v{i:02d}" for i in range(12)]
APPENDS = 12
ROWS_PER_VENDOR = 150  # per append: every file holds every vendor (arrival order)
QUERIES = 16


@pytest.fixture
def instance(tmp_path):
    with DagsterInstance.local_temp(str(tmp_path)) as inst:
        yield inst


def _batch(n: int, rng: random.Random) -> pa.Table:
    vendors = [v for v in VENDORS for _ in range(ROWS_PER_VENDOR)]
    rng.shuffle(vendors)
    start = n * len(vendors)
    return pa.table(
        {
            "id": pa.array(range(start, start + len(vendors)), pa.int64()),
            "vendor": pa.array(vendors, pa.string()),
            "amount": pa.array([float(i % 97) for i in range(len(vendors))], pa.float64()),
        }
    )


def _query(spark, ref: TableRef, rng: random.Random) -> None:
    """The workload: counts of one vendor at a time (a dashboard's filter)."""
    for _ in range(QUERIES):
        vendor = rng.choice(VENDORS)
        # Spark SQL takes the value as a parameter, never pasted into the text.
        spark.sql(
            f"SELECT count(*) FROM {table_identifier(ref)} WHERE vendor = :v", args={"v": vendor}
        ).collect()


def test_queries_choose_the_sort_key_and_the_next_scans_skip_what_was_predicted(
    make_lake, tmp_path, spark_for, instance
):
    folder = tmp_path / "scan-reports"
    thresholds = {
        **TEST_THRESHOLDS,
        "mode": "enforce",
        "guards": {"quiet_period_minutes": 0},
        "layout": {"min_predicted_gain": 0.3},
    }
    settings = make_lake(thresholds=thresholds, extra={"scan_reports": {"dir": str(folder)}})
    name = catalog_name(settings)
    catalog = open_catalog(settings, name, create=True)
    catalog.create_namespace("ns")
    rng = random.Random(52)
    first = _batch(0, rng)
    table = catalog.create_table(("ns", "events"), first.schema)
    table.append(first)
    for n in range(1, APPENDS):
        table.append(_batch(n, rng))
    sizes = [t.file.file_size_in_bytes for t in table.scan().plan_files()]
    # The table's files are at its target size: no compaction is due, only the layout is wrong.
    with table.transaction() as tx:
        tx.set_properties({"write.target-file-size-bytes": str(max(sizes))})
    table.refresh()
    ref = TableRef(name, ("ns",), "events")
    spark = spark_for(settings)

    _query(spark, ref, rng)
    result = ingest_dir(settings)
    assert result.reports >= QUERIES and not list(folder.rglob("*.json"))
    assert ingest_dir(settings).reports == 0  # the files are gone: nothing twice
    before = load_reports(settings, ref)
    assert {r.considered_data_files for r in before if r.filter is not True} == {APPENDS}

    report = layout_report(settings, ref, before)
    choice = report.choice
    assert choice.recommend, choice.reason
    assert choice.strategy == "sort" and choice.new_keys[0] == "vendor"
    assert choice.files_read_before == pytest.approx(APPENDS, abs=0.5)
    assert choice.files_read_after <= 3

    applied = apply_layout(settings, ref, by="test")
    table.refresh()
    assert sort_keys(table)[0] == "vendor" and applied.change.old_keys == ()
    rows = table.scan().to_arrow().num_rows
    stats = compute_table_stats(table, settings.thresholds)
    assert stats.unsorted_files == APPENDS  # layout_drift: the loop's rewrite now sorts them

    tick, md = maintain(settings, instance, None)
    assert str(md["why/rewrite"].value).startswith("acted:"), md["why/rewrite"].value
    table.refresh()
    assert table.scan().to_arrow().num_rows == rows
    assert compute_table_stats(table, settings.thresholds).unsorted_files == 0

    _query(spark, ref, rng)
    ingest_dir(settings)
    after = layout_report(settings, ref, load_reports(settings, ref))
    effect = after.effect
    assert effect is not None and effect.measured, effect
    assert effect.skipped_before == 0 and effect.helped
    assert effect.prediction_held, effect.verdict
    assert not after.choice.recommend  # already sorted by its best key
    stored = ScanReportStore.from_settings(settings).table(create=False)
    assert stored is not None and stored.scan().to_arrow().num_rows == len(load_reports(settings, ref))
