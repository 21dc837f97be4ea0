"""Small files: the small_files finding and the rewrite_data_files decision, both from one rewrite
plan (what Iceberg's rewrite will take), so a failing finding is always one the rewrite acts on.
The same plan heals layout drift past its max (planning/layout.py): rewrite-all on its partitions."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from icelake_assets.health.findings import Finding, Severity, grade
from icelake_assets.health.stats import SIZE_BUCKETS, TableStats
from icelake_assets.planning.decision import Decision, Evaluation, disabled
from icelake_assets.planning.deletes import deletes_crossed, position_delete_compaction
from icelake_assets.planning.layout import DriftPlan, plan_drift
from icelake_assets.settings import Policy

MiB = 1_048_576
# Iceberg's max-file-group-size-bytes default (100 GB): a partition larger than this is several groups.
MAX_FILE_GROUP_BYTES = 100 * 1024**3


def rewrite_candidates(stats: TableStats, policy: Policy) -> list[str]:
    """Partitions a rewrite should take: the small-file candidates, plus, when the delete ratio is
    crossed, every partition holding delete files (the rewrite applies and drops them), plus, past
    the max drift ratio, every partition holding drift files (planning/layout.py)."""
    chosen = set(stats.compaction_candidates) | set(plan_drift(stats, policy).partitions)
    if deletes_crossed(stats, policy):
        chosen.update(p.partition for p in stats.partitions.values() if p.delete_files and p.data_files)
    return sorted(chosen)


def small_file_limit(stats: TableStats, policy: Policy) -> int:
    """Iceberg's ``min-file-size-bytes`` that selects exactly health's small files.

    Health counts ``size < target x ratio`` (a float); Iceberg selects ``length < min`` (a long): for
    integer sizes the two agree at ``ceil(target x ratio)``. Iceberg wants it below the target."""
    target = stats.target_file_size_bytes
    return max(1, min(math.ceil(target * policy.small_files.small_file_ratio), target - 1))


@dataclass(frozen=True)
class RewritePlan:
    """What ``rewrite_data_files`` will do with ``options``, predicted with Iceberg 1.10's planner rules
    (BinPackRewriteFilePlanner): per partition it takes the files under ``min-file-size-bytes`` (and,
    with ``delete-file-threshold``, files with deletes) and rewrites a group of them when it holds more
    than one file and at least ``min-input-files`` (or more than a target's bytes), or any file with
    deletes. ``partitions`` are the chosen partitions Iceberg rewrites under these options;
    ``excluded`` the chosen ones it would skip (never named), with the reason. ``position_partitions``:
    the chosen partitions whose position deletes rewrite_position_delete_files compacts instead
    (planning/deletes.py), reading and writing ``position_delete_bytes`` rather than their
    ``position_data_bytes`` of data; ``position_reason`` says why (or why not). ``drift``: the layout
    drift past its max the rewrite heals; ``drift_partitions`` its partitions among the chosen, named
    whatever their small files, and the options then carry ``rewrite-all=true`` (Iceberg takes every
    file the run's ``where`` selects, in every named partition)."""

    partitions: tuple[str, ...]
    excluded: dict[str, str]
    options: dict[str, str]
    groups: int
    input_bytes: int  # data bytes of the named partitions (an upper bound of what is rewritten)
    position_partitions: tuple[str, ...] = ()
    position_delete_bytes: int = 0
    position_data_bytes: int = 0
    position_reason: str = ""
    drift: DriftPlan = DriftPlan()
    drift_partitions: tuple[str, ...] = ()

    @property
    def rewrite_all(self) -> bool:
        return self.options.get("rewrite-all") == "true"


def rewritable(p, min_input: int, with_deletes: bool) -> bool:
    if with_deletes and p.delete_files and p.data_files:
        return True  # delete-file-threshold=1: any data file with a delete is rewritten
    return p.small_files > 1 and p.small_files >= min_input


def plan_rewrite(stats: TableStats, policy: Policy, candidates: Sequence[str] | None = None) -> RewritePlan:
    """``candidates``: the partitions to consider (default: the table's, see rewrite_candidates).

    ``min-input-files`` is the policy's, lowered to the smallest small-file count among the chosen
    partitions (at least 2: one file rewritten alone saves nothing), so every partition the health
    check flags is one Iceberg rewrites; a chosen partition with fewer than 2 small files and no
    deletes to apply is excluded. The rewrite is run with a ``where`` naming the partitions (runner),
    so Iceberg takes nothing else. Partial progress (one commit per group batch) only past
    ``partial_progress_min_groups`` groups or ``partial_progress_min_bytes``: a small rewrite commits once."""
    sf = policy.small_files
    chosen = list(rewrite_candidates(stats, policy) if candidates is None else candidates)
    drift = plan_drift(stats, policy)
    drifting = tuple(c for c in chosen if c in set(drift.partitions))
    compaction = position_delete_compaction(stats, policy)
    # A drifting partition is rewritten whole, its deletes applied: nothing left to compact apart.
    position = tuple(c for c in chosen if c in set(compaction.partitions) and c not in drifting)
    chosen = [c for c in chosen if c not in position]
    with_deletes = deletes_crossed(stats, policy) and any(
        stats.partitions[c].delete_files for c in chosen if c in stats.partitions
    )
    parts = {c: stats.partitions[c] for c in chosen if c in stats.partitions}
    counts = [p.small_files for p in parts.values() if p.small_files > 1]
    min_input = max(2, min([sf.min_input_files, *counts]))
    named, excluded = [], {}
    for label, p in parts.items():
        if label in drifting or rewritable(p, min_input, with_deletes):
            named.append(label)
        else:
            excluded[label] = (
                f"{p.small_files} small file(s) under {small_file_limit(stats, policy)} "
                "bytes: Iceberg rewrites a group of at least 2"
            )
    for label in chosen:
        if label not in parts:
            excluded[label] = "not in the table's current snapshot"
    # One group per partition, more when a partition exceeds Iceberg's max group size (100 GB default).
    groups = sum(max(1, math.ceil(parts[n].data_bytes / MAX_FILE_GROUP_BYTES)) for n in named)
    input_bytes = sum(parts[n].data_bytes for n in named)
    partial = sf.partial_progress_enabled and (
        groups > sf.partial_progress_min_groups or input_bytes > sf.partial_progress_min_bytes
    )
    options = {
        "target-file-size-bytes": str(stats.target_file_size_bytes),
        "min-input-files": str(min_input),
        "min-file-size-bytes": str(small_file_limit(stats, policy)),
        "partial-progress.enabled": str(partial).lower(),
        "partial-progress.max-commits": str(sf.partial_progress_max_commits),
        # Default 1: groups rewrite one at a time so their commits never race each other; with a
        # SQLite catalog (one writer) racing commits fail and partial progress silently drops them,
        # so resolve_policy refuses more than 1 there.
        "max-concurrent-file-group-rewrites": str(sf.max_concurrent_file_group_rewrites),
        # Merge-on-read: a data file with any delete file is rewritten (deletes applied, then dropped).
        # ... and the delete files no live row is left for go in the same run: Iceberg removes them
        # per partition (equality deletes too); runner.rewrite_data_files cleans up what it leaves.
        **({"delete-file-threshold": "1", "remove-dangling-deletes": "true"} if with_deletes else {}),
        # Drift: files of an older spec or out of order are rewritten whatever their size.
        **({"rewrite-all": "true"} if drifting else {}),
    }
    return RewritePlan(
        tuple(sorted(named)),
        excluded,
        options,
        groups,
        input_bytes,
        position,
        sum(stats.partitions[c].delete_bytes for c in position),
        sum(stats.partitions[c].data_bytes for c in position),
        compaction.reason,
        drift,
        drifting,
    )


def decide_rewrite(
    stats: TableStats,
    policy: Policy,
    candidates: Sequence[str] | None = None,
    scope: str | None = None,
    rewrite: RewritePlan | None = None,
) -> Decision:
    """``candidates``/``scope``: a partitioned run considers only the candidates among its partitions
    (``scope`` describes them); None considers the whole table. ``rewrite``: plan_rewrite of these
    candidates when the caller has it. Only partitions Iceberg will rewrite
    under the plan's options are named (see plan_rewrite)."""
    if off := disabled("rewrite_data_files", policy):
        return off
    p = policy.small_files
    rp = plan_rewrite(stats, policy, candidates) if rewrite is None else rewrite
    chosen = list(rp.partitions)
    files = sum(stats.partitions[c].data_files for c in chosen)
    deletes = sum(stats.partitions[c].delete_files for c in chosen)
    signals: dict[str, int | float] = {
        "data_files": stats.data_files,
        "small_files": stats.small_files,
        "candidate_partitions": len(chosen),
        "candidate_files": files,
        "candidate_bytes": rp.input_bytes,
        "excluded_partitions": len(rp.excluded),
        "planned_groups": rp.groups,
        "min_input_files": int(rp.options["min-input-files"]),
        "max_files_per_partition": p.max_files_per_partition,
        "max_avg_file_bytes": p.max_avg_file_bytes,
    }
    where = f" among the run's {scope}" if scope else ""
    if candidates is not None:
        signals["table_candidate_partitions"] = len(stats.compaction_candidates)
    signals["delete_files_in_scope"] = deletes
    signals["position_delete_partitions"] = len(rp.position_partitions)
    signals["position_delete_bytes"] = rp.position_delete_bytes
    signals["data_bytes_not_rewritten"] = rp.position_data_bytes
    drifting = [c for c in chosen if c in set(rp.drift_partitions)]
    signals["drift_files"] = stats.drift_files
    signals["drift_ratio"] = round(stats.drift_ratio, 4)
    signals["max_drift_ratio"] = policy.layout.max_drift_ratio
    signals["drift_partitions"] = len(drifting)
    signals["drift_bytes"] = sum(stats.partitions[c].data_bytes for c in drifting)
    position = (
        f"position deletes of {len(rp.position_partitions)} partitions{where} compacted by "
        f"rewrite_position_delete_files ({rp.position_delete_bytes} bytes of delete files instead of "
        f"rewriting {rp.position_data_bytes} bytes of data)"
        if rp.position_partitions
        else ""
    )
    skipped = ""
    if rp.excluded:
        first = next(iter(rp.excluded.items()))
        skipped = f"; {len(rp.excluded)} flagged partitions Iceberg would skip (e.g. {first[0]}: {first[1]})"
    compacted = [c for c in chosen if c not in drifting]
    if chosen:
        whys = []
        if drifting:
            whys.append(
                f"{rp.drift.reason}; rewrite-all on the {len(drifting)} partitions{where} holding them "
                f"({signals['drift_bytes']} bytes"
                f"{', sorted by the table order' if rp.drift.sort else ''})"
            )
        if compacted:
            compacted_files = sum(stats.partitions[c].data_files for c in compacted)
            whys.append(
                (
                    f"{len(compacted)} partitions{where} with > {p.max_files_per_partition} files "
                    f"averaging < {p.max_avg_file_bytes} bytes or past the delete-file ratio "
                    f"({compacted_files} files{f', {deletes} delete files' if deletes else ''})"
                )
                if deletes
                else (
                    f"{len(compacted)} partitions{where} with > {p.max_files_per_partition} files "
                    f"averaging < {p.max_avg_file_bytes} bytes ({compacted_files} files)"
                )
            )
        why = "; ".join(whys)
        return Decision(
            "rewrite_data_files", True, why + skipped + (f"; {position}" if position else ""), signals
        )
    if position:
        return Decision("rewrite_data_files", True, position + skipped, signals)
    return Decision(
        "rewrite_data_files",
        False,
        f"no partition{where} has > {p.max_files_per_partition} files averaging < "
        f"{p.max_avg_file_bytes} bytes that Iceberg would rewrite{skipped}",
        signals,
    )


def rewrite_options(stats: TableStats, policy: Policy) -> dict[str, str]:
    """Options of rewrite_data_files for the table's candidates (see plan_rewrite)."""
    return plan_rewrite(stats, policy).options


def _mb(n: float) -> float:
    return round(n / MiB, 3)


def grade_candidate(data_files: int, policy: Policy) -> Severity:
    """The small_files grade of one compaction candidate the rewrite takes: its data files against
    ``max_files_per_partition`` (the table's finding is its busiest candidate's)."""
    return grade(data_files, policy.small_files.max_files_per_partition)


def taken_candidates(stats: TableStats, rewrite: RewritePlan) -> list[str]:
    """The compaction candidates ``rewrite`` (plan_rewrite of the table) takes: the partitions the
    small_files finding fails on (a candidate Iceberg would skip is one no run can fix)."""
    planned = set(rewrite.partitions)
    return [c for c in stats.compaction_candidates if c in planned]


def small_files_finding(stats: TableStats, policy: Policy, rewrite: RewritePlan | None = None) -> Finding:
    """Graded on the compaction candidates the table's rewrite takes (``rewrite``: plan_rewrite of the
    table, computed once by evaluate): a candidate Iceberg would skip (fewer than 2 small files) is
    one no run can fix, so it does not fail the finding (it is counted in ``skipped_candidate_partitions``)."""
    sf = policy.small_files
    rewrite = plan_rewrite(stats, policy) if rewrite is None else rewrite
    taken = taken_candidates(stats, rewrite)
    worst_parts = [p for p in stats.worst_partitions(10) if p.data_files]
    rows = tuple(
        {
            "partition": p.partition,
            "data_files": p.data_files,
            "small_files": p.small_files,
            "avg_file_mb": _mb(p.avg_file_bytes),
            "records": p.records,
        }
        for p in worst_parts
    )
    metrics: dict[str, int | float] = {
        "data_files": stats.data_files,
        "small_files": stats.small_files,
        "fragment_files": stats.fragment_files,
        "candidate_partitions": len(taken),
        "candidate_files": sum(stats.partitions[c].data_files for c in taken),
        "candidate_bytes": sum(stats.partitions[c].data_bytes for c in taken),
        "skipped_candidate_partitions": len(stats.compaction_candidates) - len(taken),
        "partitions": len(stats.partitions),
        "data_bytes": stats.data_bytes,
        "target_file_size_bytes": stats.target_file_size_bytes,
        "small_file_limit_bytes": stats.small_file_limit_bytes,
        "file_size_p10_bytes": stats.file_size_p10,
        "file_size_p50_bytes": stats.file_size_p50,
        "file_size_p90_bytes": stats.file_size_p90,
        "small_file_ratio": round(stats.small_files / stats.data_files, 4) if stats.data_files else 0.0,
    }
    metrics.update({f"files_{name}": stats.size_histogram.get(name, 0) for name, _ in SIZE_BUCKETS})
    if not taken:
        skipped = len(stats.compaction_candidates)
        return Finding(
            "small_files",
            Severity.OK,
            f"no partition has > {sf.max_files_per_partition} files averaging "
            f"< {_mb(sf.max_avg_file_bytes)} MB "
            + (f"that Iceberg would rewrite ({skipped} have fewer than 2 small files) " if skipped else "")
            + f"({stats.small_files} of {stats.data_files} files are small)",
            "nothing to compact",
            metrics,
            rows,
        )
    busiest = max(stats.partitions[p].data_files for p in taken)
    severity = grade_candidate(busiest, policy)
    return Finding(
        "small_files",
        severity,
        f"{len(taken)} partitions hold {metrics['candidate_files']} files averaging under "
        f"{_mb(sf.max_avg_file_bytes)} MB (worst: {busiest} files; max {sf.max_files_per_partition})",
        f"run rewrite_data_files ({sf.strategy}) on the {len(taken)} candidate partitions",
        metrics,
        rows,
    )


def evaluate(stats: TableStats, policy: Policy) -> Evaluation:
    """The small_files finding and the rewrite decision from one plan of the table's rewrite."""
    rewrite = plan_rewrite(stats, policy)
    return Evaluation(
        small_files_finding(stats, policy, rewrite), decide_rewrite(stats, policy, rewrite=rewrite)
    )
