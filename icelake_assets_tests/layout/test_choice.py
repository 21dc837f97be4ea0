"""The layout decision on a replayed sample: selective equality filters on a random column recommend a
sort on it; no reports, unfiltered scans, a constant column, a small gain, a rewrite that does not pay,
the cost guard or a recent change recommend nothing, each with its reason."""

from __future__ import annotations

from datetime import datetime, timedelta

import numpy as np
import pyarrow as pa
from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField

from icelake_assets.layout.candidates import Candidate
from icelake_assets.layout.choice import choose
from icelake_assets.layout.mining import mine
from icelake_assets.layout.replay import replay
from icelake_assets.layout.reports import ScanReport
from icelake_assets.settings.policy_schema import LayoutPolicy

SCHEMA = Schema(NestedField(1, "user", LongType()), NestedField(2, "const", LongType()))
ROWS, TABLE_BYTES, TARGET = 20_000, 20 * 2**20, 2**20  # 20 files at the target size
NOW = datetime(2024, 6, 1)
POLICY = LayoutPolicy()


def sample() -> pa.Table:
    rng = np.random.default_rng(3)
    return pa.table({"user": rng.integers(0, 1000, ROWS), "const": np.full(ROWS, 7)})


def decide(filter_: object, scans: int = 30, read: int = TABLE_BYTES, **kw):
    reports = [
        ScanReport("l.ns.t", 1, filter_, 0, result_data_files=20, total_file_size_bytes=read)
        for _ in range(scans)
    ]
    usage = mine(reports, "l.ns.t")
    result = replay(
        usage, sample(), SCHEMA, UNPARTITIONED_PARTITION_SPEC, Candidate("current", ()), TARGET, TABLE_BYTES
    )
    return choose(usage, result, kw.pop("policy", POLICY), NOW, **kw)


EQ_USER = {"type": "eq", "term": "user", "value": "(3-digit-int)"}


def test_selective_equality_filters_recommend_sorting_by_their_column():
    choice = decide(EQ_USER)
    assert choice.recommend is True, choice.reason
    assert (choice.old_keys, choice.new_keys, choice.strategy) == ((), ("user",), "sort")
    assert choice.files_read_before > 18 and choice.files_read_after < 2
    assert choice.predicted_gain > 0.8 and choice.reports_used == 30
    assert choice.rewrite_bytes == TABLE_BYTES and choice.bytes_saved_per_window > TABLE_BYTES
    assert "sort(user)" in choice.reason


def test_no_reports_or_unfiltered_scans_recommend_nothing():
    none = decide(EQ_USER, scans=0)
    assert (none.recommend, none.reason) == (False, "no scan reports of the table in the last 30 days")
    unfiltered = decide(True)
    assert unfiltered.recommend is False and "no filtered scans (30 unfiltered" in unfiltered.reason
    negations = decide({"type": "not-null", "term": "user"})
    assert negations.recommend is False and "no selective filters" in negations.reason


def test_a_filter_on_a_column_of_one_value_recommends_nothing():
    choice = decide({"type": "eq", "term": "const", "value": "(1-digit-int)"})
    assert choice.recommend is False and choice.strategy is None and choice.new_keys == ()
    assert "not selective" in choice.reason and choice.predicted_gain == 0


def test_gain_payback_cost_guard_and_cadence():
    small = decide(EQ_USER, policy=LayoutPolicy(min_predicted_gain=0.99))
    assert small.recommend is False and "under min_predicted_gain 99%" in small.reason
    # Three scans reading 1 MiB each would save under 3 MiB: not worth rewriting 20 MiB.
    cheap = decide(EQ_USER, scans=3, read=2**20)
    assert cheap.recommend is False and "less than the 20,971,520 bytes" in cheap.reason
    capped = decide(EQ_USER, max_rewrite_bytes=2**20)
    assert capped.recommend is False and "over the cost guard" in capped.reason
    recent = decide(EQ_USER, last_change=NOW - timedelta(days=2))
    assert recent.recommend is False and "changed 2.0 days ago" in recent.reason
    assert recent.new_keys == ("user",)  # the prediction is still there to show
    assert decide(EQ_USER, last_change=NOW - timedelta(days=8)).recommend is True
