"""The maintenance ops' work, free of Dagster: read the op's own signal, act only past its threshold,
and return what happened, typed (maintenance/results/models.py). Order (seed documents): expire → orphans →
rewrite data (maintenance/ops/rewrite.py) → rewrite manifests.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from typing import TypeVar

from pyiceberg.table import Table
from pyspark.sql import SparkSession

from icelake_assets.catalog.connection import TableRef, current_snapshot_id as _snapshot_id
from icelake_assets.health.orphan_phases import (
    CandidateEvent,
    CandidateStore,
    OrphanPhases,
    phases_of,
    removable_orphans,
)
from icelake_assets.health.orphans import (
    OrphanFile,
    OrphanScan,
    file_key,
    referenced_locations,
    verify_referenced_files,
)
from icelake_assets.health.retention import expiry_forecast
from icelake_assets.health.stats import TableStats
from icelake_assets.health.storage import file_state
from icelake_assets.maintenance.results.models import (
    ExpireResult,
    ManifestResult,
    OpResult,
    OrphanResult,
    OrphanScanSummary,
    ProcedureRow,
)
from icelake_assets.maintenance.spark import fencing, procedures
from icelake_assets.planning.manifests import decide_manifests
from icelake_assets.planning.orphans import crossed, decide_orphans
from icelake_assets.planning.snapshots import decide_expire, expire_cutoff
from icelake_assets.settings import Policy
from icelake_assets.types import IcelakeError

StatsFn = Callable[[Table], TableStats]
# The table's orphan scan (IcelakeResource.scan_orphans: every known table's files are left alone).
OrphanScanFn = Callable[[TableRef, Table, Policy], OrphanScan]
R = TypeVar("R", bound=OpResult)


def timed(table: Table, work: Callable[[], R]) -> R:
    """``work``'s result with its duration and the table's snapshots before and after it."""
    table.refresh()
    before = _snapshot_id(table)
    started = time.perf_counter()
    outcome = work()
    duration = round(time.perf_counter() - started, 3)
    table.refresh()
    return replace(outcome, duration_s=duration, snapshot_before=before, snapshot_after=_snapshot_id(table))


def refreshed(table: Table) -> Table:
    table.refresh()
    return table


def expire_snapshots(
    spark_fn: Callable[[], SparkSession], ref: TableRef, table: Table, policy: Policy, stats_fn: StatsFn
) -> ExpireResult:
    def work() -> ExpireResult:
        stats = stats_fn(table)
        d = decide_expire(stats, policy)
        if not d.act:
            return ExpireResult(acted=False, reason=d.reason, signals=d.signals)
        cutoff = expire_cutoff(stats, policy)
        forecast = set(expiry_forecast(stats, policy).expire)  # the ids decide_expire counted
        row: ProcedureRow = procedures.expire_snapshots(spark_fn(), ref, cutoff, policy.snapshots.min_keep)
        table.refresh()
        remaining = {s.snapshot_id for s in table.metadata.snapshots}
        removed = {p.snapshot_id for p in stats.snapshot_points} - remaining
        mismatch = _forecast_mismatch(forecast, removed, row.get("deleted_manifest_lists_count"))
        reason = f"{d.reason}; forecast mismatch: {mismatch}" if mismatch else d.reason
        return ExpireResult(
            acted=True,
            reason=reason,
            signals=d.signals,
            procedure=row,
            snapshots_before=stats.snapshots,
            snapshots_after=len(table.metadata.snapshots),
            snapshots_expired=len(removed),
            snapshots_forecast=len(forecast),
            older_than=cutoff.isoformat(),
            retain_last=policy.snapshots.min_keep,
            forecast_mismatches=len(forecast ^ removed),
            expired_not_forecast=tuple(sorted(removed - forecast)[:20]),
            forecast_not_expired=tuple(sorted(forecast - removed)[:20]),
            forecast_mismatch=mismatch,
        )

    return timed(table, work)


def _forecast_mismatch(forecast: set[int], removed: set[int], manifest_lists: object) -> str | None:
    """Where what the decision counted (health/retention.py) and what Iceberg removed differ, or None.

    Each expired snapshot has its own manifest list, so the procedure's deleted manifest lists count
    the snapshots it expired. A difference means the forecast's mirror of Iceberg's rule is off, or
    the table changed between decision and procedure (a writer's new tag or branch)."""
    parts = []
    if removed - forecast:
        extra = removed - forecast
        parts.append(f"{len(extra)} expired that were not forecast (e.g. {min(extra)})")
    if forecast - removed:
        parts.append(f"{len(forecast - removed)} forecast that were kept (e.g. {min(forecast - removed)})")
    if isinstance(manifest_lists, int) and manifest_lists != len(removed):
        parts.append(
            f"the procedure deleted {manifest_lists} manifest lists for {len(removed)} expired snapshots"
        )
    if not parts:
        return None
    return f"forecast {len(forecast)} snapshots, Iceberg expired {len(removed)}: " + "; ".join(parts)


def remove_orphan_files(
    spark_fn: Callable[[], SparkSession],
    ref: TableRef,
    table: Table,
    policy: Policy,
    stats_fn: StatsFn,
    scan_orphans: OrphanScanFn,
    candidates: CandidateStore | None = None,
    now: float | None = None,
    run_id: str | None = None,
) -> OrphanResult:
    """Delete exactly the orphans ``scan_orphans`` decided on (health/orphans.py: not referenced, not hidden,
    not another table's, old enough), one by one through the table's own FileIO, then verify that every
    file the metadata references still exists (else raise ReferencedFilesMissingError).

    With ``orphans.recovery_window_hours`` > 0 in two phases (health/orphan_phases.py): the new orphans
    are recorded in ``candidates``; only those recorded a window before ``now`` (epoch s, default the
    clock) are deleted, each still unreferenced and unchanged at deletion time; the others are dropped
    from the candidates, with why.

    Iceberg's ``remove_orphan_files`` procedure is not called: it lists the whole location itself and
    would delete the files of a table nested inside it. So this op needs no Spark."""

    def work() -> OrphanResult:
        clock = time.time() if now is None else now
        scan = scan_orphans(ref, table, policy)
        info = OrphanScanSummary(
            listed_files=scan.listed_files,
            orphans_found=len(scan.orphans),
            hidden_files=scan.hidden_files,
            skipped_other_tables=sum(scan.skipped.values()),
            skipped_reasons=dict(scan.skipped),
            skipped_sample=tuple(f"{p} ({r})" for p, r in scan.skipped_sample),
            refused=scan.refused or None,
            deferred=scan.deferred or None,
        )
        phases = phases_of(scan, candidates, str(ref), policy.orphans.recovery_window_hours, clock)
        orphans = removable_orphans(scan, phases)
        d = decide_orphans(
            len(orphans), sum(o.size for o in orphans), policy, phases.summary() if phases else None
        )
        signals = {
            **d.signals,
            "hidden_files": scan.hidden_files,
            "skipped_other_tables": sum(scan.skipped.values()),
        }
        if scan.refused:
            return OrphanResult(
                acted=False, reason=f"never cleaned: {scan.refused}", signals=signals, scan=info
            )
        if scan.deferred:
            return OrphanResult(acted=False, reason=scan.deferred, signals=signals, scan=info)
        dropped: list[CandidateEvent] = []
        if phases is not None:  # the first phase, committed before anything is deleted
            assert candidates is not None
            candidates.record(str(ref), phases.first_phase_events(), clock, run_id)
            dropped.extend(phases.dropped)
        if not d.act or not crossed(len(orphans), policy):  # nothing to delete (new candidates wait)
            res = OrphanResult(acted=d.act, reason=d.reason, signals=signals, scan=info)
            return _waiting(res, phases, dropped)
        # A commit since the listing may reference a listed file (e.g. add_files): keep those.
        listed_at = table.metadata_location
        table.refresh()
        if table.metadata_location != listed_at:
            now_referenced = {file_key(r).path for r in referenced_locations(table)}
            late = [o for o in orphans if file_key(o.path).path in now_referenced]
            dropped.extend(_drop(o, "referenced by a commit since the listing") for o in late)
            orphans = [o for o in orphans if o not in late]
        removed: list[OrphanFile] = []
        errors = []
        for orphan in orphans:
            try:
                fencing.check(f"{ref} remove_orphan_files")  # each deletion is a commit
                if phases is not None and file_state(table.io, orphan.path) != (orphan.size, orphan.mtime_ns):
                    dropped.append(_drop(orphan, "changed or gone at deletion time"))
                    continue
                table.io.delete(orphan.path)
                removed.append(orphan)
            except FileNotFoundError:
                pass  # gone already: nothing to do
            except OSError as err:
                errors.append(f"{orphan.path}: {type(err).__name__}: {err}")
        reason = d.reason
        if phases is not None:  # the second phase's record; lost (a crash), the next run drops them
            assert candidates is not None
            deleted = [CandidateEvent(o.path, o.size, o.mtime_ns, "deleted") for o in removed]
            try:
                candidates.record(str(ref), deleted + dropped[len(phases.dropped) :], clock, run_id)
            except IcelakeError as err:  # the files are gone either way: report, verify the table
                reason = f"{reason}; deletions not recorded ({err}): the next run drops them"
        checked = verify_referenced_files(table)
        if errors:
            reason = f"{reason}; {len(errors)} files could not be deleted (e.g. {errors[0]})"
        res = OrphanResult(
            acted=True,
            reason=reason,
            signals=signals,
            scan=info,
            orphans_removed=len(removed),
            bytes_found=sum(o.size for o in scan.orphans),
            bytes_removed=sum(o.size for o in removed),
            removed_sample=tuple(o.path for o in removed[:20]),
            referenced_files_verified=checked,
            delete_errors=tuple(errors[:20]),
        )
        return _waiting(res, phases, dropped)

    return timed(table, work)


def _waiting(res: OrphanResult, phases: OrphanPhases | None, dropped: list[CandidateEvent]) -> OrphanResult:
    """``res`` with the two phases' numbers: the pending orphans, the candidates recorded and dropped."""
    if phases is None:
        return res
    return replace(
        res,
        pending_files=len(phases.pending),
        pending_bytes=phases.pending_bytes,
        candidates_recorded=len(phases.unmarked),
        first_removable_at=phases.first_removable_at,
        recovery_window_hours=phases.window_hours,
        candidates_dropped=tuple(f"{e.path}: {e.reason}" for e in dropped[:20]),
    )


def _drop(o: OrphanFile, reason: str) -> CandidateEvent:
    return CandidateEvent(o.path, o.size, o.mtime_ns, "dropped", reason)


def rewrite_manifests(
    spark_fn: Callable[[], SparkSession],
    ref: TableRef,
    table: Table,
    policy: Policy,
    stats_fn: StatsFn,
    rewrite_commits: int = 0,
) -> ManifestResult:
    def work() -> ManifestResult:
        stats = stats_fn(table)
        d = decide_manifests(stats, policy, rewrite_commits)
        if not d.act:
            return ManifestResult(acted=False, reason=d.reason, signals=d.signals)
        row, attempts = _rewrite_manifests_retrying(spark_fn(), ref)
        return ManifestResult(
            acted=True,
            reason=d.reason,
            signals=d.signals,
            procedure=row,
            procedure_attempts=attempts,
            manifests_before=stats.manifests,
            manifests_after=stats_fn(refreshed(table)).manifests,
        )

    return timed(table, work)


# A writer committing while manifests are rewritten can remove a manifest the rewrite planned to
# replace (Iceberg then refuses: "Deleted manifest ... could not be found in the latest snapshot");
# planning again from the new snapshot is the fix, as Iceberg's own commit retries do for conflicts.
_MANIFEST_CONFLICTS = ("ValidationException", "CommitFailedException")
_MANIFEST_ATTEMPTS = 4


def _rewrite_manifests_retrying(spark: SparkSession, ref: TableRef) -> tuple[ProcedureRow, int]:
    """The procedure's row and the attempts it took."""
    for attempt in range(1, _MANIFEST_ATTEMPTS + 1):
        try:
            return procedures.rewrite_manifests(spark, ref), attempt
        except Exception as err:  # py4j wraps the Java exception: match it by name
            if attempt == _MANIFEST_ATTEMPTS or not any(c in str(err) for c in _MANIFEST_CONFLICTS):
                raise
            time.sleep(0.2 * attempt)
    raise AssertionError("unreachable")
