"""The run state between ops is stored as JSON by the results' codec, and state pickled by the version
before maintenance/ had rooms (data/run_state_6a0a252.pickle, written by commit 6a0a252's classes)
still loads after the upgrade."""

from pathlib import Path
from typing import cast

from dagster import DagsterInstance, In, Out, job, op
from upath import UPath

from icelake_assets.maintenance.results.models import (
    ExpireResult,
    ManifestResult,
    OrphanResult,
    RewriteResult,
    StatisticsResult,
)
from icelake_assets.orchestration.assets.run_state import RunState, RunStates
from icelake_assets.orchestration.assets.run_state_io import RunStateIOManager, RunStateStore

LEGACY = Path(__file__).parent / "data" / "run_state_6a0a252.pickle"


def test_state_pickled_before_the_rooms_loads_typed_after_the_upgrade():
    states = RunStateIOManager.load_from_path(UPath(LEGACY))
    assert isinstance(states, RunStates) and states.errors == {"c.ns.u": "expire_snapshots failed: gone"}
    state = states.tables["c.ns.t"]
    assert [type(o) for o in state.ops] == [
        ExpireResult,
        OrphanResult,
        RewriteResult,
        ManifestResult,
        StatisticsResult,
    ]
    rewrite = cast(RewriteResult, state.ops[2])
    assert rewrite.position_deletes is not None and rewrite.position_deletes.commits == 1
    assert rewrite.failed_names() == ("2026-01-03",) and rewrite.attempt == 2
    # The loaded results behave as today's: the run's counts and renderings read them.
    assert state.rewrite_commits() == 2 and state.rewrote() == 2 + 1 + 1
    assert state.ops[0].did() == "25 of 30 snapshots expired"
    assert cast(OrphanResult, state.ops[1]).scan.skipped_reasons == {"other table": 1}


def test_a_run_passes_its_state_between_ops_as_json(tmp_path):
    expected = RunStates(
        tables={
            "c.ns.t": RunState(
                table="c.ns.t",
                before_snapshot_id=3,
                before={"data_files": 9},
                ops=(
                    ExpireResult(acted=False, reason="below"),
                    RewriteResult(acted=True, reason="r", procedure={"rewritten_data_files_count": 8}),
                ),
            )
        }
    )
    seen: list[RunStates] = []

    @op(out=Out(RunStates, io_manager_key="state"))
    def first() -> RunStates:
        return expected

    @op(ins={"states": In(RunStates)})
    def second(states: RunStates) -> None:
        seen.append(states)

    @job(resource_defs={"state": RunStateStore(base_dir=str(tmp_path))})
    def two_ops():
        second(first())

    instance = DagsterInstance.ephemeral()
    result = two_ops.execute_in_process(instance=instance)
    assert result.success
    assert seen == [expected]
    [stored] = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert stored.read_bytes().startswith(b"{")  # JSON, not a pickle
    # Where Dagster's filesystem IO managers keep an op output (earlier runs' state is found there).
    assert stored == tmp_path / result.run_id / "first" / "result"
    # No log line per step output or input (each is an event-log write).
    logs = [e.user_message for e in instance.all_logs(result.run_id) if not e.dagster_event]
    assert not [m for m in logs if "Writing file at" in m or "Loading file from" in m]
