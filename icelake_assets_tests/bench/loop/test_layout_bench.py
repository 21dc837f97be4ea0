"""The layout benchmark's pure helpers: its workload, the same query in Spark's and DuckDB's parameter
forms and as pyiceberg's filter, and the classing of Spark's scan reports."""

from datetime import timedelta

from pyiceberg.expressions import AlwaysTrue, And, EqualTo, GreaterThanOrEqual

from bench.loop.layout_bench import (
    CLASSES,
    COUNTRIES,
    DAYS,
    START,
    Measured,
    Query,
    duckdb_sql,
    kind_of,
    per_class,
    ratio,
    row_filter,
    sql,
    workload,
)
from icelake_assets.layout.reports import ScanReport


def test_the_workload_has_the_classes_shares_and_values_from_the_datas_ranges():
    queries = workload(80, 52, customers=1000)
    counts = {k: sum(q.kind == k for q in queries) for k in CLASSES}
    assert counts == {"customer_id = ?": 56, "country = ? AND ts >= ?": 16, "unfiltered": 8}
    assert queries == workload(80, 52, customers=1000)  # seeded: the same queries before and after
    assert [q.kind for q in queries[:10]] != sorted(q.kind for q in queries[:10])  # shuffled
    for q in queries:
        if q.kind == "customer_id = ?":
            assert set(q.params) == {"customer_id"} and 0 <= q.params["customer_id"] < 1000
        elif q.kind == "unfiltered":
            assert q.params == {}
        else:
            assert q.params["country"] in COUNTRIES
            # the last tenth of the time range: a selective filter on a time-sorted table
            assert START + timedelta(days=DAYS * 0.9) <= q.params["since"] < START + timedelta(days=DAYS)


def test_the_same_query_in_spark_duckdb_and_pyiceberg():
    text = sql("country = ? AND ts >= ?", "t")
    assert (
        text == "SELECT count(*) AS n, sum(amount) AS amount FROM t WHERE country = :country AND ts >= :since"
    )
    assert duckdb_sql(text).endswith("WHERE country = $country AND ts >= $since")
    assert duckdb_sql("SELECT x::BIGINT, '10:30' FROM t") == "SELECT x::BIGINT, '10:30' FROM t"
    assert sql("unfiltered", "t") == "SELECT count(*) AS n, sum(amount) AS amount FROM t"
    since = START + timedelta(days=360)
    assert row_filter(Query("country = ? AND ts >= ?", {"country": "FR", "since": since})) == And(
        EqualTo(term="country", value="FR"), GreaterThanOrEqual(term="ts", value=since.isoformat())
    )
    assert row_filter(Query("customer_id = ?", {"customer_id": 7})) == EqualTo(term="customer_id", value=7)
    assert row_filter(Query("unfiltered", {})) == AlwaysTrue()


def test_reports_are_classed_by_their_filtered_columns():
    # Spark adds not-null predicates on the columns a query filters
    assert kind_of("customer_id eq and customer_id not-null") == "customer_id = ?"
    assert (
        kind_of("country eq and country not-null and ts gt-eq and ts not-null") == "country = ? AND ts >= ?"
    )
    assert kind_of(None) == "unfiltered"
    assert kind_of("amount gt") is None
    assert ratio(40, 1) == 40 and ratio(1, 0) == float("inf")


def _report(filter_json, files: int) -> ScanReport:
    return ScanReport(
        "bench.shop.events", 1, filter_json, 0, result_data_files=files, skipped_data_files=40 - files
    )


def test_per_class_means_files_and_medians_latencies():
    measured = [
        Measured("customer_id = ?", 1, 0.1, 0.01, 0.02, (1, 1.0)),
        Measured("customer_id = ?", 3, 0.3, 0.03, 0.04, (1, 1.0)),
        Measured("unfiltered", 40, 0.5, 0.05, 0.06, (9, 9.0)),
        Measured("country = ? AND ts >= ?", 40, 0.7, 0.07, 0.08, (2, 2.0)),
    ]
    eq = {"type": "eq", "term": "customer_id", "value": "(2-digit-int)"}
    reports = [_report(eq, 1), _report(eq, 3), _report(True, 40)]
    out = per_class(measured, reports)
    assert out["customer_id = ?"]["planned"] == 2 and out["customer_id = ?"]["reported"] == 2
    assert out["customer_id = ?"]["spark_s"] == 0.2 and out["customer_id = ?"]["reports"] == 2
    assert out["unfiltered"]["reported"] == 40
    assert out["all filtered"]["queries"] == 3 and out["all filtered"]["planned"] == (1 + 3 + 40) / 3
    assert out["all filtered"]["reports"] == 2  # the country query's report did not arrive
