"""The replay against files with known bounds: a table written by pyiceberg in arrival order on a SQLite
catalog (one file per append), its sample laid out as the current layout reproduces the files scan
planning reads; sorting by the filtered column predicts far fewer; and, for any data, layout and
predicate, the predicted files lie between the files holding a match and all files."""

from __future__ import annotations

import random
from datetime import datetime, timedelta

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings, strategies as st
from pyiceberg.expressions import And, EqualTo, GreaterThanOrEqual, LessThan
from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC, PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import IdentityTransform
from pyiceberg.types import LongType, NestedField, StringType

from icelake_assets.catalog.connection import open_catalog
from icelake_assets.layout.candidates import Candidate, file_ranges, lay_out, order, partition_ids
from icelake_assets.layout.mining import mine
from icelake_assets.layout.replay import current_layout, files_read, read_sample, replay_table
from icelake_assets.layout.reports import ScanReport
from icelake_assets_tests.conftest import catalog_name, new_lake

FILES, ROWS = 20, 2_000
ARROW = pa.schema(
    [("id", pa.int64()), ("user", pa.string()), ("ts", pa.timestamp("us")), ("region", pa.string())]
)
START = datetime(2024, 3, 1)


def batch(first: int, rng: random.Random) -> pa.Table:
    ids = range(first, first + ROWS)
    return pa.table(
        {
            "id": list(ids),
            "user": [f"user{rng.randrange(400):04d}" for _ in ids],
            "ts": [START + timedelta(minutes=i) for i in ids],
            "region": [rng.choice(["eu", "us", "apac"]) for _ in ids],
        },
        schema=ARROW,
    )


@pytest.fixture(scope="module")
def events(tmp_path_factory):
    """``ns.events``: 20 appends of 2,000 rows in arrival order (ts and id rising, user random)."""
    lake = new_lake(tmp_path_factory)
    catalog = open_catalog(lake, catalog_name(lake), create=True)
    catalog.create_namespace("ns")
    table = catalog.create_table(("ns", "events"), schema=ARROW)
    rng = random.Random(7)
    for n in range(FILES):
        table.append(batch(n * ROWS, rng))
    return catalog.load_table(("ns", "events"))


def reports(filter_: object, n: int, table_bytes: int) -> list[ScanReport]:
    return [
        ScanReport(
            "lake.ns.events", 1, filter_, 0, result_data_files=FILES, total_file_size_bytes=table_bytes
        )
        for _ in range(n)
    ]


def table_bytes(table) -> int:
    return int(table.current_snapshot().summary["total-files-size"])


def test_sorting_by_the_filtered_column_predicts_far_fewer_files(events):
    size = table_bytes(events)
    usage = mine(reports({"type": "eq", "term": "user", "value": "(hash-1a2b3c4d)"}, 30, size), "ns.events")
    result = replay_table(events, usage, target_bytes=size // FILES, sample_rows=200_000)
    assert result.sample_rows == FILES * ROWS and result.shapes_replayed == 1
    assert result.current is not None and result.best is not None
    assert result.current.candidate == Candidate("current", ())
    by_user = next(p for p in result.predictions if p.candidate == Candidate("sort", ("user",)))
    assert result.best == by_user
    # 400 users over 20 files: in arrival order nearly every file holds every user.
    assert result.current.fraction_read > 0.9
    assert by_user.fraction_read * 5 < result.current.fraction_read
    assert by_user.files_read < 3 < FILES - 2 < result.current.files_read
    # The reports said every file was read (nothing skipped): so did the replay, roughly.
    assert result.calibration is not None and abs(result.calibration.error) < 0.1


def test_a_range_on_the_arrival_column_is_already_selective(events):
    size = table_bytes(events)
    window = {
        "type": "and",
        "left": {"type": "gt-eq", "term": "ts", "value": "(timestamp)"},
        "right": {"type": "lt", "term": "ts", "value": "(timestamp)"},
    }
    result = replay_table(events, mine(reports(window, 10, size), "ns.events"), size // FILES, 200_000)
    assert result.current is not None and result.current.fraction_read < 0.15  # a 2% window: 1-2 files
    assert result.best is not None and result.best.fraction_read >= result.current.fraction_read - 1e-9


@pytest.mark.parametrize(
    "expression",
    [
        EqualTo("user", "user0042"),
        EqualTo("id", 12_345),
        And(GreaterThanOrEqual("ts", "2024-03-05T00:00:00"), LessThan("ts", "2024-03-06T00:00:00")),
        EqualTo("region", "eu"),
        EqualTo("user", "nobody"),
    ],
)
def test_the_current_layout_reads_the_files_scan_planning_plans(events, expression):
    sample = read_sample(events, ("id", "user", "ts", "region"), 200_000)
    schema = events.schema()
    laid = lay_out(sample, schema, partition_ids(sample, schema, events.spec()), current_layout(events), ROWS)
    assert len(laid.files) == FILES
    assert files_read(laid, schema, expression) == len(list(events.scan(row_filter=expression).plan_files()))


def test_files_never_span_partitions():
    sample = pa.table({"k": ["a", "b", "a", "b", "a"], "v": [1, 2, 3, 4, 5]})
    schema = Schema(NestedField(1, "k", StringType()), NestedField(2, "v", LongType()))
    spec = PartitionSpec(PartitionField(1, 1000, IdentityTransform(), "k"))
    parts = partition_ids(sample, schema, spec)
    laid = lay_out(sample, schema, parts, Candidate("sort", ("v",)), 10)
    assert [f.record_count for f in laid.files] == [3, 2]
    unpartitioned = partition_ids(sample, schema, UNPARTITIONED_PARTITION_SPEC)
    assert len(lay_out(sample, schema, unpartitioned, Candidate("current", ()), 10).files) == 1


INT_SCHEMA = Schema(NestedField(1, "a", LongType()), NestedField(2, "b", LongType()))
LAYOUTS = [
    Candidate("current", ()),
    Candidate("sort", ("a",)),
    Candidate("sort", ("b", "a")),
    Candidate("zorder", ("a", "b")),
]


@settings(max_examples=60, deadline=None)
@given(
    a=st.lists(st.one_of(st.none(), st.integers(-50, 50)), min_size=1, max_size=80),
    seed=st.integers(0, 1000),
    per_file=st.integers(1, 20),
    layout=st.sampled_from(LAYOUTS),
    low=st.integers(-60, 60),
    width=st.integers(0, 30),
)
def test_predicted_files_lie_between_the_files_holding_a_match_and_all_files(
    a, seed, per_file, layout, low, width
):
    rng = np.random.default_rng(seed)
    sample = pa.table({"a": pa.array(a, pa.int64()), "b": pa.array(rng.integers(0, 5, len(a)), pa.int64())})
    parts = np.zeros(len(a), dtype=np.int64)
    laid = lay_out(sample, INT_SCHEMA, parts, layout, per_file)
    expression = And(GreaterThanOrEqual("a", low), LessThan("a", low + width))
    predicted = files_read(laid, INT_SCHEMA, expression)
    rows = [a[i] for i in order(sample, parts, layout)]
    holding = sum(
        any(v is not None and low <= v < low + width for v in rows[start:stop])
        for start, stop in file_ranges(parts, per_file)
    )
    assert holding <= predicted <= len(laid.files)
