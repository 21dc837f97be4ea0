"""The plain-JSON form of the op results (maintenance/results/models.py) read back: a retried op's earlier
attempts come back from the event log as the dicts ``OpResult.to_dict()`` wrote."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import cast

from icelake_assets.maintenance.results.models import (
    AnyOpResult,
    DanglingDeletes,
    ExpireResult,
    ManifestResult,
    OrphanResult,
    OrphanScanSummary,
    PartitionValueList,
    PositionDeletes,
    ProcedureRow,
    RewriteResult,
    Scalar,
    StatisticsResult,
)

_CLASSES: dict[str, type[AnyOpResult]] = {
    c.op: c for c in (ExpireResult, OrphanResult, RewriteResult, ManifestResult, StatisticsResult)
}


def op_result_from_dict(data: Mapping[str, object]) -> AnyOpResult:
    """An op result from its ``to_dict()`` (e.g. read back from the event log as JSON)."""
    op = str(data["op"])
    cls = _CLASSES.get(op)
    if cls is None:
        raise ValueError(f"unknown maintenance op {op!r} (known: {', '.join(_CLASSES)})")
    signals = data.get("signals")
    res = data.get("result")
    res = res if isinstance(res, Mapping) else {}
    base = cls(
        acted=bool(data["acted"]),
        reason=str(data["reason"]),
        signals=dict(signals) if isinstance(signals, Mapping) else {},
        duration_s=float(cast(float, data.get("duration_s") or 0.0)),
        snapshot_before=_opt_int(data.get("snapshot_before")),
        snapshot_after=_opt_int(data.get("snapshot_after")),
        attempt=_int(data.get("attempt")) or 1,
        merged_attempts=_opt_int(res.get("attempts")) if cls is not ManifestResult else None,
        effect=_opt_str(res.get("effect")),
        effect_reason=_opt_str(res.get("effect_reason")),
    )
    if isinstance(base, ExpireResult):
        return _expire(base, res)
    if isinstance(base, OrphanResult):
        return _orphans(base, res)
    if isinstance(base, RewriteResult):
        return _rewrite(base, res)
    if isinstance(base, StatisticsResult):
        return _statistics(base, res)
    return _manifests(base, res)


def _expire(base: ExpireResult, res: Mapping[str, object]) -> ExpireResult:
    if not res:
        return base
    own = {
        "snapshots_before",
        "snapshots_after",
        "snapshots_expired",
        "snapshots_forecast",
        "older_than",
        "retain_last",
        "forecast_mismatches",
        "expired_not_forecast",
        "forecast_not_expired",
        "forecast_mismatch",
    }
    return replace(
        base,
        procedure=_row(res, own),
        snapshots_before=_opt_int(res.get("snapshots_before")),
        snapshots_after=_opt_int(res.get("snapshots_after")),
        snapshots_expired=_opt_int(res.get("snapshots_expired")),
        snapshots_forecast=_opt_int(res.get("snapshots_forecast")),
        older_than=_opt_str(res.get("older_than")),
        retain_last=_opt_int(res.get("retain_last")),
        forecast_mismatches=_opt_int(res.get("forecast_mismatches")),
        expired_not_forecast=tuple(int(cast(int, i)) for i in _seq(res.get("expired_not_forecast"))),
        forecast_not_expired=tuple(int(cast(int, i)) for i in _seq(res.get("forecast_not_expired"))),
        forecast_mismatch=_opt_str(res.get("forecast_mismatch")),
    )


def _orphans(base: OrphanResult, res: Mapping[str, object]) -> OrphanResult:
    reasons = res.get("skipped_reasons")
    scan = OrphanScanSummary(
        listed_files=_int(res.get("listed_files")),
        orphans_found=_int(res.get("orphans_found")),
        hidden_files=_int(res.get("hidden_files")),
        skipped_other_tables=_int(res.get("skipped_other_tables")),
        skipped_reasons={str(k): _int(v) for k, v in reasons.items()} if isinstance(reasons, Mapping) else {},
        skipped_sample=tuple(str(s) for s in _seq(res.get("skipped_sample"))),
        refused=_opt_str(res.get("refused")),
        deferred=_opt_str(res.get("deferred")),
    )
    return replace(
        base,
        scan=scan,
        orphans_removed=_int(res.get("orphans_removed")),
        bytes_found=_int(res.get("bytes_found")),
        removed_sample=tuple(str(s) for s in _seq(res.get("removed_sample"))),
        referenced_files_verified=_opt_int(res.get("referenced_files_verified")),
        delete_errors=tuple(str(s) for s in _seq(res.get("delete_errors"))),
    )


def _dangling(res: Mapping[str, object]) -> DanglingDeletes | None:
    if "dangling_delete_commits" not in res:
        return None
    prefix = "position_deletes_"
    equality = ("removed_position_delete_files_count", "removed_equality_delete_files_count")
    return DanglingDeletes(
        commits=_int(res["dangling_delete_commits"]),
        position={k[len(prefix) :]: _scalar(v) for k, v in res.items() if k.startswith(prefix)},
        equality={k: _scalar(res[k]) for k in (*equality, "min_data_sequence_number") if k in res},
        error=_opt_str(res.get("dangling_deletes_error")),
    )


def _position(value: object) -> PositionDeletes | None:
    if not isinstance(value, Mapping):
        return None
    row = value.get("procedure")
    return PositionDeletes(
        partitions=_strs(value.get("partitions")),
        where=_opt_str(value.get("where")),
        estimated_bytes=_int(value.get("estimated_bytes")),
        data_bytes_not_rewritten=_int(value.get("data_bytes_not_rewritten")),
        procedure={str(k): _scalar(v) for k, v in row.items()} if isinstance(row, Mapping) else {},
        delete_files_before=_opt_int(value.get("delete_files_before")),
        delete_files_after=_opt_int(value.get("delete_files_after")),
        commits=_int(value.get("commits")),
        error=_opt_str(value.get("error")),
    )


def _rewrite(base: RewriteResult, res: Mapping[str, object]) -> RewriteResult:
    if not res:
        return base
    dangling = _dangling(res)
    own = set(_REWRITE_KEYS)
    if dangling is not None:
        own |= set(dangling.to_dict())
    options = res.get("options")
    return replace(
        base,
        procedure=_row(res, own),
        dangling=dangling,
        position_deletes=_position(res.get("position_deletes")),
        data_files_before=_opt_int(res.get("data_files_before")),
        data_files_after=_opt_int(res.get("data_files_after")),
        small_files_before=_opt_int(res.get("small_files_before")),
        small_files_after=_opt_int(res.get("small_files_after")),
        candidate_partitions=_strs(res.get("candidate_partitions")),
        where=_opt_str(res.get("where")),
        options={str(k): str(v) for k, v in options.items()} if isinstance(options, Mapping) else {},
        partial_progress_fallback=bool(res.get("partial_progress_fallback")),
        estimated_rewrite_bytes=_opt_int(res.get("estimated_rewrite_bytes")),
        snapshots_committed=_opt_int(res.get("snapshots_committed")),
        delete_files_before=_opt_int(res.get("delete_files_before")),
        delete_files_after=_opt_int(res.get("delete_files_after")),
        partitions_rewritten=_strs(res.get("partitions_rewritten")),
        partitions_failed=_strs(res.get("partitions_failed")),
        iceberg_failed_data_files_count=_opt_int(res.get("iceberg_failed_data_files_count")),
        failed_data_files_count=_opt_int(res.get("failed_data_files_count")),
        failed_partition_values=_values(res.get("failed_partition_values")),
        rewritten_partition_values=_values(res.get("rewritten_partition_values")),
        error=_opt_str(res.get("error")),
        error_kind=_opt_str(res.get("error_kind")),
        partition_keys_failed=_strs(res["partition_keys_failed"]) if "partition_keys_failed" in res else None,
        partition_keys_rewritten=(
            _strs(res["partition_keys_rewritten"]) if "partition_keys_rewritten" in res else None
        ),
    )


_REWRITE_KEYS = (
    "position_deletes",
    "data_files_before",
    "data_files_after",
    "small_files_before",
    "small_files_after",
    "candidate_partitions",
    "where",
    "options",
    "partial_progress_fallback",
    "estimated_rewrite_bytes",
    "snapshots_committed",
    "delete_files_before",
    "delete_files_after",
    "partitions_rewritten",
    "partitions_failed",
    "iceberg_failed_data_files_count",
    "failed_data_files_count",
    "failed_partition_values",
    "rewritten_partition_values",
    "error",
    "error_kind",
    "partition_keys_failed",
    "partition_keys_rewritten",
)


def _manifests(base: ManifestResult, res: Mapping[str, object]) -> ManifestResult:
    if not res:
        return base
    return replace(
        base,
        procedure=_row(res, {"attempts", "manifests_before", "manifests_after", "effect", "effect_reason"}),
        procedure_attempts=_int(res.get("attempts")) or 1,
        manifests_before=_opt_int(res.get("manifests_before")),
        manifests_after=_opt_int(res.get("manifests_after")),
    )


def _statistics(base: StatisticsResult, res: Mapping[str, object]) -> StatisticsResult:
    if not res:
        return base
    ndv = res.get("ndv")
    registered = res.get("registered")
    return replace(
        base,
        columns=_strs(res.get("columns")),
        statistics_file=_opt_str(res.get("statistics_file")),
        statistics_snapshot_id=_opt_int(res.get("statistics_snapshot_id")),
        statistics_bytes=_opt_int(res.get("statistics_bytes")),
        ndv={str(k): _int(v) for k, v in ndv.items()} if isinstance(ndv, Mapping) else {},
        ndv_read_back=_opt_int(res.get("ndv_read_back")),
        registered=registered if isinstance(registered, bool) else None,
        partition_statistics_file=_opt_str(res.get("partition_statistics_file")),
        partition_statistics_snapshot_id=_opt_int(res.get("partition_statistics_snapshot_id")),
        error=_opt_str(res.get("error")),
        error_kind=_opt_str(res.get("error_kind")),
    )


def _strict_int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _opt_int(value: object) -> int | None:
    if value is None or isinstance(value, bool):
        return None
    return int(value) if isinstance(value, (int, float, str)) else None


def _int(value: object) -> int:
    return _opt_int(value) or 0


def _opt_str(value: object) -> str | None:
    return None if value is None else str(value)


def _scalar(value: object) -> Scalar:
    return value if value is None or isinstance(value, (str, int, float, bool)) else str(value)


def _seq(value: object) -> Sequence[object]:
    return value if isinstance(value, (list, tuple)) else ()


def _strs(value: object) -> tuple[str, ...]:
    return tuple(str(v) for v in _seq(value))


def _values(value: object) -> PartitionValueList | None:
    if value is None:
        return None
    return tuple(tuple(None if x is None else str(x) for x in _seq(v)) for v in _seq(value))


def _row(res: Mapping[str, object], own: set[str]) -> ProcedureRow:
    """The procedure's columns of a result dict: every key the result class does not own."""
    skip = own | {"attempts", "effect", "effect_reason"}
    return {k: _scalar(v) for k, v in res.items() if k not in skip}


__all__ = ["op_result_from_dict"]
