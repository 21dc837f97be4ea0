"""The chaos soak's report (bench/soak/chaos_soak.py): progress lines while it runs, then the fault log,
the writers' actions, the backfills, the terminated runs, the paused run workers, the figures, the row checks and the
assertions as Markdown tables (rich's Markdown box), ready for BENCHMARKS.md."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from rich import box
from rich.console import Console
from rich.table import Table as RichTable

from bench.soak.checks import AuditCheck, HealthCheck, Outcome, RowCheck
from bench.soak.faults import FaultRecord

console = Console(width=200, soft_wrap=True, highlight=False)


def say(t0: float, message: str) -> None:
    """A progress line, stamped with the soak's elapsed time."""
    elapsed = time.monotonic() - t0
    console.print(f"[{int(elapsed // 60):02d}:{int(elapsed % 60):02d}] {message}", markup=False)


@dataclass(frozen=True)
class RunFigures:
    """The instance's runs: what the figures count, and each run's window (for the audit check)."""

    counts: Counter  # launched, success, failure, canceled, worker lost, failed for an outage
    windows: dict[str, tuple[float, float, str]]  # run id -> (start, end, status)


def run_figures(instance) -> RunFigures:
    from dagster import RunsFilter

    from icelake_assets.orchestration.runs.model import FAILURE_KIND_TAG, OUTAGE, TABLE_TAG
    from icelake_assets.orchestration.runs.recovery import STALE_TAG

    counts: Counter = Counter()
    windows = {}
    for record in instance.get_run_records(RunsFilter()):
        run = record.dagster_run
        status = run.status.value
        start = record.start_time or record.create_timestamp.timestamp()
        windows[run.run_id] = (start, record.end_time or time.time(), status)
        if TABLE_TAG not in run.tags:
            counts["other runs"] += 1  # the overview's asset runs: no table maintained
            continue
        counts["launched"] += 1
        counts[status.lower()] += 1
        if STALE_TAG in run.tags:
            counts["worker lost"] += 1
        if run.tags.get(FAILURE_KIND_TAG) == OUTAGE:
            counts["failed for an outage"] += 1
    return RunFigures(counts, windows)


@dataclass(frozen=True)
class Verdict:
    """Everything the final checks found."""

    outcomes: tuple[Outcome, ...]
    rows: tuple[RowCheck, ...] = ()
    audits: tuple[AuditCheck, ...] = ()
    health: tuple[HealthCheck, ...] = ()
    runs: Counter | None = None
    audit_kinds: Counter | None = None
    healed_in: float | None = None  # seconds from the last fault to every table Healthy
    healed_after_writers: float | None = None  # seconds from the writers' stop to the same
    backfills: tuple = ()  # run_checks.BackfillResult
    terminations: tuple = ()  # run_checks.TerminationResult
    pauses: tuple = ()  # pause.PauseResult


@dataclass(frozen=True)
class WriterLine:
    name: str
    table: str
    actions: Counter  # (op, outcome) -> count


def markdown(title: str, columns: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
    table = RichTable(*columns, title=title, box=box.MARKDOWN, title_justify="left")
    for row in rows:
        table.add_row(*(str(c) for c in row))
    console.print(table)


def report(
    header: Sequence[str],
    faults: Sequence[FaultRecord],
    events: Sequence[str],
    writers: Sequence[WriterLine],
    verdict: Verdict,
) -> bool:
    """Prints the report; True when every assertion held."""
    for line in header:
        console.print(line, markup=False)
    markdown(
        "Faults",
        ["at (s)", "fault", "target PID", "detail"],
        [[f"{f.at:.0f}", f.kind, f.target or "-", f.detail] for f in faults],
    )
    injected = Counter(f.kind for f in faults if f.target is not None)
    console.print(
        f"faults injected: {dict(injected)}; skipped (no target): {sum(f.target is None for f in faults)}"
    )
    for event in events:
        console.print(f"event: {event}", markup=False)
    markdown(
        "Writers",
        ["writer", "table", "committed", "failed", "unknown", "actions"],
        [
            [w.name, w.table]
            + [sum(c for (_, st), c in w.actions.items() if st == s) for s in ("ok", "fail", "unknown")]
            + [", ".join(f"{op} {st} {c}" for (op, st), c in sorted(w.actions.items()))]
            for w in writers
        ],
    )
    backfills_and_terminations(verdict)
    if verdict.runs is not None and verdict.audit_kinds is not None:
        runs, kinds = verdict.runs, verdict.audit_kinds
        left = [
            sum(getattr(a, k) for a in verdict.audits)
            for k in ("maintenance_commits", "by_own_records", "by_reconciled")
        ]
        seconds = lambda s: "not healed" if s is None else f"{s:.0f}"  # noqa: E731
        markdown(
            "Figures",
            ["figure", "value"],
            [
                ["maintenance runs launched", runs["launched"]],
                ["succeeded", runs["success"]],
                ["failed", runs["failure"]],
                ["... of which lost their worker (killed: short retry)", runs["worker lost"]],
                ["... of which failed for an outage (short retry)", runs["failed for an outage"]],
                ["canceled", runs["canceled"]],
                ["audit: ops that acted", kinds["op/acted"]],
                ["audit: recovery/run_failed (in progress, worker gone)", kinds["recovery/run_failed"]],
                [
                    "audit: recovery/worker_lost (failed by Dagster, worker killed)",
                    kinds["recovery/worker_lost"],
                ],
                ["audit: recovery/reconciled commits", kinds["recovery/reconciled"]],
                [
                    "maintenance commits left in history (own records / reconciled)",
                    f"{left[0]} ({left[1]} / {left[2]})",
                ],
                ["partition backfills (multiprocess executor) launched", len(verdict.backfills)],
                ["... succeeded", sum(b.status == "SUCCESS" for b in verdict.backfills)],
                [
                    "... in a PID namespace of their own",
                    sum(b.backfill.namespace != "host" for b in verdict.backfills),
                ],
                ["runs terminated through the API", len(verdict.terminations)],
                ["... in their rewrite", sum(t.termination.in_rewrite for t in verdict.terminations)],
                [
                    "... inside a partial-progress rewrite (a file group committed)",
                    sum(t.termination.partial > 0 for t in verdict.terminations),
                ],
                ["run workers paused (SIGSTOP, SIGCONT past the lease)", len(verdict.pauses)],
                ["... resumed", sum(p.pause.resumed is not None for p in verdict.pauses)],
                ["heal time after the last fault (s)", seconds(verdict.healed_in)],
                ["heal time after the writers stopped (s)", seconds(verdict.healed_after_writers)],
            ],
        )
        markdown(
            "Health at the end",
            ["table", "status", "score"],
            [
                [
                    h.table,
                    h.status + (f" (expected: {'; '.join(h.expected)[:100]})" if h.expected else ""),
                    h.score,
                ]
                for h in verdict.health
            ],
        )
    if verdict.rows:
        markdown("Rows", ["table", "check"], [[r.table, r.describe()] for r in verdict.rows])
    markdown(
        "Assertions",
        ["assertion", "result"],
        [[o.name, "ok" if o.ok else "FAILED"] for o in verdict.outcomes],
    )
    for o in verdict.outcomes:
        for detail in o.details:  # a passed assertion may say how (the heal time)
            console.print(f"{'ok' if o.ok else 'FAILED'} {o.name}: {detail}", markup=False)
    return all(o.ok for o in verdict.outcomes)


def backfills_and_terminations(verdict: Verdict) -> None:
    if verdict.backfills:
        markdown(
            "Backfills (multiprocess executor)",
            ["at (s)", "backfill", "partition", "PID namespace", "run", "executor", "status", "s", "detail"],
            [
                [
                    f"{b.backfill.soak_at:.0f}",
                    b.backfill.label,
                    b.backfill.partition,
                    b.backfill.namespace,
                    (b.backfill.run_id or "-")[:8],
                    b.executor,
                    b.status + (" (stale)" if b.stale else ""),
                    "-" if b.seconds is None else f"{b.seconds:.0f}",
                    b.message.splitlines()[0][:120] if b.message else "",
                ]
                for b in verdict.backfills
            ],
        )
    if verdict.terminations:
        markdown(
            "Runs terminated through the API",
            [
                "at (s)",
                "run",
                "table",
                "step then",
                "launcher",
                "before",
                "after",
                "ended after (s)",
                "partial",
                "commits",
                "late",
            ],
            [
                [
                    f"{t.termination.soak_at:.0f}",
                    t.termination.run_id[:8],
                    t.termination.table,
                    t.termination.step,
                    t.termination.answer[:60],
                    t.termination.status_before,
                    t.status + (" (stale)" if t.stale else ""),
                    "-" if t.termination.ended is None else f"{t.termination.ended - t.termination.at:.0f}",
                    t.termination.partial,
                    t.commits,
                    len(t.late),
                ]
                for t in verdict.terminations
            ],
        )
    if verdict.pauses:
        markdown(
            "Run workers paused (SIGSTOP)",
            ["at (s)", "run", "table", "PID", "step then", "SIGCONT after (s)", "status", "commits", "late"],
            [
                [
                    f"{p.pause.soak_at:.0f}",
                    p.pause.run_id[:8],
                    p.pause.table,
                    p.pause.pid,
                    p.pause.step,
                    "-" if p.pause.resumed is None else f"{p.pause.resumed - p.pause.at:.0f}",
                    p.status,
                    p.commits,
                    len(p.late),
                ]
                for p in verdict.pauses
            ],
        )
