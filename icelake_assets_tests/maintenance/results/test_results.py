"""The typed op results: the dict the audit records (and the retry observations carry) keeps the keys
it always had, and reads back to the same result (maintenance/results/codec.py)."""

import json
from dataclasses import replace

import pytest

from icelake_assets.maintenance.results.codec import decode_result, encode
from icelake_assets.maintenance.results.models import (
    DanglingDeletes,
    ExpireResult,
    ManifestResult,
    OpResult,
    OrphanResult,
    OrphanScanSummary,
    PositionDeletes,
    RewriteResult,
    StatisticsResult,
)

COMMON = {"acted": True, "reason": "why", "signals": {"n": 3}, "duration_s": 1.5, "snapshot_before": 1}

EXPIRE = ExpireResult(
    **COMMON,
    snapshot_after=2,
    procedure={"deleted_data_files_count": 0, "deleted_manifest_lists_count": 24},
    snapshots_before=30,
    snapshots_after=6,
    snapshots_expired=24,
    snapshots_forecast=25,
    older_than="2026-01-01T00:00:00",
    retain_last=5,
    forecast_mismatches=1,
    forecast_not_expired=(7,),
    forecast_mismatch="forecast 25 snapshots, Iceberg expired 24",
)
SCAN = OrphanScanSummary(
    listed_files=10, orphans_found=3, hidden_files=2, skipped_other_tables=1, skipped_reasons={"nested": 1}
)
ORPHANS = OrphanResult(
    **COMMON,
    scan=SCAN,
    orphans_removed=2,
    bytes_found=300,
    removed_sample=("a", "b"),
    delete_errors=("c: boom",),
)
REWRITE = RewriteResult(
    **COMMON,
    procedure={"rewritten_data_files_count": 50, "added_data_files_count": 2, "rewritten_bytes_count": 900},
    dangling=DanglingDeletes(commits=1, position={"rewritten_delete_files_count": 4}, error="late"),
    data_files_before=56,
    data_files_after=8,
    small_files_before=50,
    small_files_after=2,
    candidate_partitions=("d=1", "d=2"),
    where="d IN ('1', '2')",
    options={"min-input-files": "5"},
    estimated_rewrite_bytes=1000,
    snapshots_committed=2,
    delete_files_before=4,
    delete_files_after=0,
    partitions_rewritten=("d=1",),
    partitions_failed=("d=2",),
    iceberg_failed_data_files_count=0,
    failed_data_files_count=25,
    failed_partition_values=(("2",),),
    rewritten_partition_values=(("1",),),
    error="Spark failed",
    error_kind="spark",
    partition_keys_failed=("2026-01-02",),
    partition_keys_rewritten=("2026-01-01",),
)
MANIFESTS = ManifestResult(
    **COMMON,
    procedure={"rewritten_manifests_count": 31, "added_manifests_count": 1},
    procedure_attempts=2,
    manifests_before=31,
    manifests_after=1,
)
STATISTICS = StatisticsResult(
    **COMMON,
    columns=("id", "page"),
    statistics_file="file:/t/metadata/9-a.stats",
    statistics_snapshot_id=9,
    statistics_bytes=5000,
    ndv={"id": 20000, "page": 50},
    ndv_read_back=2,
    registered=True,
    partition_statistics_file="file:/t/metadata/partition-stats-9-b.parquet",
    partition_statistics_snapshot_id=9,
)
ACTED: list[OpResult] = [
    EXPIRE,
    ORPHANS,
    REWRITE,
    MANIFESTS,
    STATISTICS,
    replace(STATISTICS, statistics_file=None, ndv={}, error="boom", error_kind="error"),
    replace(
        REWRITE,
        position_deletes=PositionDeletes(
            partitions=("d=3",),
            where="d = '3'",
            estimated_bytes=4096,
            data_bytes_not_rewritten=10**9,
            procedure={"rewritten_delete_files_count": 4, "added_delete_files_count": 1},
            delete_files_before=4,
            delete_files_after=1,
            commits=1,
            error="late",
        ),
    ),
]


def test_the_audit_keys_are_the_ones_the_dicts_had():
    assert list(REWRITE.details())[:3] == [
        "rewritten_data_files_count",
        "added_data_files_count",
        "rewritten_bytes_count",
    ]
    assert set(REWRITE.details()) >= {
        "dangling_delete_commits",
        "position_deletes_rewritten_delete_files_count",
        "dangling_deletes_error",
        "partitions_failed",
        "failed_partition_values",
        "error",
        "error_kind",
        "partition_keys_failed",
    }
    assert REWRITE.details()["failed_partition_values"] == [["2"]]
    assert MANIFESTS.details() == {
        "rewritten_manifests_count": 31,
        "added_manifests_count": 1,
        "attempts": 2,
        "manifests_before": 31,
        "manifests_after": 1,
    }
    assert ORPHANS.details()["skipped_reasons"] == {"nested": 1} and ORPHANS.details()["delete_errors"] == [
        "c: boom"
    ]
    assert EXPIRE.details()["forecast_not_expired"] == [7] and EXPIRE.deleted_manifest_lists_count == 24
    assert list(EXPIRE.to_dict()) == [
        "op",
        "acted",
        "reason",
        "signals",
        "result",
        "duration_s",
        "snapshot_before",
        "snapshot_after",
        "attempt",
    ]


def test_an_op_that_did_not_act_records_no_result_but_the_orphan_scan():
    for cls in (ExpireResult, RewriteResult, ManifestResult, StatisticsResult):
        assert cls(acted=False, reason="below").details() == {}
    skipped = OrphanResult(acted=False, reason="refused", scan=replace(SCAN, refused="nested table"))
    assert skipped.details() == {**SCAN.to_dict(), "refused": "nested table"}
    assert "orphans_removed" not in skipped.details()


@pytest.mark.parametrize(
    "result", [*ACTED, ExpireResult(acted=False, reason="no"), OrphanResult(acted=False, reason="no")]
)
def test_every_result_reads_back_from_its_json(result: OpResult):
    back = _round_trip(result)
    assert back == result and type(back) is type(result)


def _round_trip(result: OpResult) -> OpResult:
    return decode_result(json.loads(json.dumps(encode(result))))


def test_the_effect_and_the_folded_attempts_travel_with_the_result():
    judged = REWRITE.with_effect("partial", "1 of 2 partitions")
    assert list(judged.details())[-2:] == ["effect", "effect_reason"]
    assert _round_trip(judged) == judged
    merged = replace(REWRITE, merged_attempts=3)
    assert merged.details()["attempts"] == 3 and _round_trip(merged) == merged


def test_an_iceberg_count_we_replace_reads_back_to_the_same_audit_dict():
    ours = replace(REWRITE, procedure={**REWRITE.procedure, "failed_data_files_count": 0})
    assert ours.details()["failed_data_files_count"] == 25
    assert _round_trip(ours).to_dict() == ours.to_dict()


def test_rewrite_failures_name_dagster_keys_when_there_are_any():
    assert REWRITE.failed and REWRITE.failed_names() == ("2026-01-02",)
    labels = replace(REWRITE, partition_keys_failed=None, partition_keys_rewritten=None)
    assert labels.failed_names() == ("d=2",) and labels.rewritten_names() == ("d=1",)
    assert not replace(REWRITE, partitions_failed=(), error=None).failed


def test_an_unknown_op_is_refused():
    with pytest.raises(ValueError, match="unknown maintenance op"):
        decode_result({"op": "vacuum", "fields": {"acted": True, "reason": "?"}})
