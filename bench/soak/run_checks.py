"""The chaos soak's assertions on runs (bench/soak/chaos_soak.py), beside bench/soak/checks.py:

7. stale verdicts: no run the recovery tagged ``icelake/stale_run`` (its worker judged gone) ended
   SUCCESS: its worker was alive;
8. backfills (bench/soak/backfill.py): none failed by the recovery while its worker lived (the soak
   never kills a backfill's worker; one killed by a signal before the verdict is a true one);
9. terminated runs (bench/soak/terminate.py): each ended CANCELED (FAILURE only when it had already
   failed, or its worker was killed by a later fault and the recovery failed it), and none asked for
   a step retry after its cancel (no STEP_UP_FOR_RETRY event);
10. and none of them committed a snapshot (``icelake.run-id``) later than its Terminate plus
    TERMINATE_COMMIT_GRACE_SECONDS (2 s), as read when it ended and at the end of the soak.
Beside these, bench/soak/pause.py checks the paused runs and bench/soak/retention.py the retention
table.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from dagster import DagsterEventType, DagsterInstance, RunsFilter

from bench.soak.backfill import Backfill
from bench.soak.checks import Outcome
from bench.soak.terminate import TERMINATE_COMMIT_GRACE_SECONDS, Termination, run_commits
from icelake_assets.orchestration.runs.recovery import STALE_TAG

STALE_MESSAGES = ("is gone", "has not renewed its lease", "failed by the maintenance sensor")


def failure_message(instance: DagsterInstance, run_id: str) -> str:
    records = instance.get_records_for_run(run_id, of_type=DagsterEventType.RUN_FAILURE).records
    messages = [
        r.event_log_entry.dagster_event.message or "" for r in records if r.event_log_entry.dagster_event
    ]
    return messages[-1] if messages else ""


def executor_of(instance: DagsterInstance, run_id: str) -> str:
    """Which executor ran the run, from its engine events."""
    records = instance.get_records_for_run(run_id, of_type=DagsterEventType.ENGINE_EVENT, limit=100).records
    for record in records:
        text = (
            record.event_log_entry.dagster_event.message or "" if record.event_log_entry.dagster_event else ""
        )
        if "multiprocess executor" in text:
            return "multiprocess"
        if "in process" in text.lower() or "in-process" in text.lower():
            return "in process"
    return "?"


@dataclass(frozen=True)
class BackfillResult:
    backfill: Backfill
    status: str  # the run's status ("no run": the worker never created one)
    executor: str
    stale: bool  # tagged icelake/stale_run
    seconds: float | None
    message: str  # its failure message, if it failed
    false_verdict: bool

    @property
    def ok(self) -> bool:
        return not self.false_verdict

    def describe(self) -> str:
        b = self.backfill
        run = b.run_id[:8] if b.run_id else "no run"
        return (
            f"{b.label} {b.partition} ({b.namespace}, worker PID {b.pid}, exit {b.returncode}): run {run} "
            f"{self.status}{' stale' if self.stale else ''}: {self.message[:200]}"
        )


def worker_said(b: Backfill) -> str:
    """Why a backfill's worker made no run: its log's last line, and what the product left out."""
    try:
        lines = [line for line in Path(b.log).read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        return ""
    left_out = [line for line in lines if "left out of the code location" in line]
    return "; ".join([*left_out[:1], *lines[-1:]])


def check_backfills(instance: DagsterInstance, backfills: Sequence[Backfill]) -> list[BackfillResult]:
    out = []
    for b in backfills:
        record = instance.get_run_record_by_id(b.run_id) if b.run_id else None
        if record is None:  # the worker failed before its run (say, its project could not load)
            out.append(BackfillResult(b, "no run", "-", False, None, worker_said(b), False))
            continue
        run = record.dagster_run
        status = run.status.value
        message = failure_message(instance, run.run_id) if status == "FAILURE" else ""
        stale = STALE_TAG in run.tags or any(m in message for m in STALE_MESSAGES)
        end = record.end_time
        # Alive at the verdict: the worker exited after the run ended, or not by a signal.
        alive = not b.killed or (b.ended is not None and end is not None and b.ended > end)
        seconds = (end - record.start_time) if end and record.start_time else None
        out.append(
            BackfillResult(
                b, status, executor_of(instance, run.run_id), stale, seconds, message, stale and alive
            )
        )
    return out


def check_stale_successes(instance: DagsterInstance) -> Outcome:
    """No run the recovery judged dead (``icelake/stale_run``) went on to succeed."""
    stale = [r for r in instance.get_runs(RunsFilter()) if STALE_TAG in r.tags]
    succeeded = [r for r in stale if r.status.value == "SUCCESS"]
    return Outcome(
        f"stale verdicts: none of the {len(stale)} runs tagged {STALE_TAG} ended SUCCESS",
        not succeeded,
        tuple(
            f"run {r.run_id} ({r.job_name}, {r.tags.get('icelake/table', '-')}) SUCCESS" for r in succeeded
        ),
    )


@dataclass(frozen=True)
class TerminationResult:
    termination: Termination
    status: str  # at the end of the soak
    stale: bool
    late: tuple[tuple[int, float], ...]  # (snapshot id, seconds after the Terminate) past the grace
    commits: int  # its commits seen (at its end and at the soak's end)
    retries: int = 0  # its STEP_UP_FOR_RETRY events: a step retried after the cancel

    @property
    def status_ok(self) -> bool:
        t = self.termination
        ended = self.status == "CANCELED" or (
            self.status == "FAILURE" and (t.status_before == "FAILURE" or self.stale)
        )
        return ended and not self.retries

    def describe(self) -> str:
        t = self.termination
        late = ", ".join(f"{s} at +{d:.1f} s" for s, d in self.late) or "none"
        took = "" if t.ended is None else f" {t.ended - t.at:.0f} s later"
        return (
            f"run {t.run_id[:8]} of {t.table} terminated in {t.step} ({t.answer}): {t.status_before} -> "
            f"{self.status}{took}{' (stale: worker killed)' if self.stale else ''}; "
            f"{t.partial} rewrite commits before it (partial progress); {self.retries} STEP_UP_FOR_RETRY; "
            f"code server {t.code_server}; {self.commits} commits, "
            f"after +{TERMINATE_COMMIT_GRACE_SECONDS:.0f} s: {late}"
            + (f"; read at its end failed: {t.read_error}" if t.read_error else "")
        )


def check_terminations(
    instance: DagsterInstance, terminations: Sequence[Termination], load_table
) -> list[TerminationResult]:
    """``load_table(name)``: the table as it is now (its history since: commits read at the run's end
    may have been expired)."""
    out = []
    for t in terminations:
        run = instance.get_run_by_id(t.run_id)
        status = run.status.value if run else "?"
        try:
            now = run_commits(load_table(t.table), t.run_id)
        except Exception:
            now = ()
        commits = dict(t.commits) | dict(now)
        late = tuple(
            (sid, at - t.at)
            for sid, at in sorted(commits.items())
            if at > t.at + TERMINATE_COMMIT_GRACE_SECONDS
        )
        stale = run is not None and STALE_TAG in run.tags
        retries = len(
            instance.get_records_for_run(t.run_id, of_type=DagsterEventType.STEP_UP_FOR_RETRY).records
        )
        out.append(TerminationResult(t, status, stale, late, len(commits), retries))
    return out


def run_outcomes(
    instance: DagsterInstance,
    backfills: Sequence[BackfillResult],
    terminations: Sequence[TerminationResult],
    errors: Sequence[str] = (),
) -> tuple[Outcome, ...]:
    return (
        check_stale_successes(instance),
        Outcome(
            f"backfills: none of {len(backfills)} failed by the recovery while its worker lived",
            all(b.ok for b in backfills),
            tuple(b.describe() for b in backfills if not b.ok) + tuple(errors),
        ),
        Outcome(
            f"terminate: each of {len(terminations)} terminated runs ended CANCELED, no step retried",
            all(t.status_ok for t in terminations),
            tuple(t.describe() for t in terminations if not t.status_ok),
        ),
        Outcome(
            f"terminate: no commit of a terminated run after Terminate + {TERMINATE_COMMIT_GRACE_SECONDS:.0f} s",
            not any(t.late for t in terminations),
            tuple(t.describe() for t in terminations if t.late),
        ),
    )


def dump_runs(instance: DagsterInstance, path: Path) -> None:
    """Every run of the instance, one JSON line each (the PostgreSQL server goes with the soak: what is
    kept for inspection)."""
    with open(path, "w") as out:
        for record in instance.get_run_records(RunsFilter()):
            run = record.dagster_run
            line = {
                "run_id": run.run_id,
                "job": run.job_name,
                "status": run.status.value,
                "start": record.start_time,
                "end": record.end_time,
                "tags": dict(run.tags),
            }
            if run.status.value == "FAILURE":
                line["failure"] = failure_message(instance, run.run_id)[:2000]
            out.write(json.dumps(line) + "\n")
