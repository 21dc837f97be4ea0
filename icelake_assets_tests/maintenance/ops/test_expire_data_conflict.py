"""expire_data on real Spark when a writer commits while it deletes (the chaos soak's retention
table, a writer every 2 s): the DELETE is counted and made again on the writer's snapshot, and the
result names only the run's own commit. The conflict is injected at the moment Spark met it (a real
pyiceberg commit, then the exception Spark raised in the soak) because the scan/commit interleaving
cannot be timed from a test."""

from datetime import UTC, datetime, timedelta

import pyarrow as pa
import pytest

from icelake_assets.catalog.connection import TableRef, open_catalog
from icelake_assets.health.stats import compute_table_stats
from icelake_assets.maintenance.ops import expire_data as op
from icelake_assets.maintenance.spark import row_delete
from icelake_assets_tests.conftest import TEST_THRESHOLDS, catalog_name, new_lake

NOW = datetime.now(UTC).replace(tzinfo=None)
# What Spark raised in the soak (seed 1484020774): a writer committed between the DELETE's scan and
# its runtime filter.
SPARK_SAID = (
    "An error occurred while calling o123.sql.\n: java.lang.IllegalStateException: Runtime file "
    "filtering is not possible: the table has been concurrently modified. Row-level operation scan "
    "snapshot ID: 1, current table snapshot ID: 2. If an external process modifies the table, enable "
    "table caching in the catalog."
)


def _rows(ids: range, days_old: int) -> pa.Table:
    ts = NOW - timedelta(days=days_old)
    return pa.table(
        {"id": pa.array(list(ids), pa.int64()), "ts": pa.array([ts] * len(ids), pa.timestamp("us"))}
    )


@pytest.fixture
def lake(tmp_path_factory):
    thresholds = {
        **TEST_THRESHOLDS,
        "guards": {"quiet_period_minutes": 0},
        "retention": {"column": "ts", "keep_days": 7},
    }
    settings = new_lake(tmp_path_factory, thresholds)
    cat = open_catalog(settings, catalog_name(settings), create=True)
    cat.create_namespace("ns")
    t = cat.create_table(("ns", "t"), _rows(range(0), 0).schema)
    t.append(_rows(range(0, 20), 30))  # past the cut-off
    t.append(_rows(range(20, 30), 1))
    return settings, TableRef(catalog_name(settings), ("ns",), "t"), t


def test_a_writer_committing_during_the_delete_makes_it_count_and_delete_again(lake, spark_for, monkeypatch):
    settings, ref, t = lake
    spark = spark_for(settings)
    real_delete = row_delete.delete_where
    calls: list[str] = []

    def conflicting(spark_, ref_, condition, properties=None):
        calls.append(condition)
        if len(calls) == 1:  # the writer's commit lands first: old rows (expired) and new ones
            t.append(pa.concat_tables([_rows(range(100, 105), 40), _rows(range(200, 203), 0)]))
            raise RuntimeError(SPARK_SAID)
        real_delete(spark_, ref_, condition, properties)

    monkeypatch.setattr(row_delete, "delete_where", conflicting)
    policy = settings.thresholds
    res = op.expire_data(
        lambda: spark, ref, t, policy, lambda tb: compute_table_stats(tb, policy), approved=True
    )

    assert len(calls) == 2 and calls[0] == calls[1], calls
    assert res.acted
    # Counted on the writer's snapshot: its 5 expired rows too; one commit, the run's own.
    assert res.matched_before == 25 and res.matched_after == 0
    assert len(res.commits) == 1
    t.refresh()
    assert sorted(t.scan().to_arrow()["id"].to_pylist()) == [*range(20, 30), 200, 201, 202]


def test_the_conflict_spark_raised_is_a_commit_conflict():
    from icelake_assets.causes import root_cause

    assert root_cause(RuntimeError(SPARK_SAID)).kind == "commit_conflict"
    assert root_cause(RuntimeError("java.lang.IllegalStateException: something else")).kind == "error"
