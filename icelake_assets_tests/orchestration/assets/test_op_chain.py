"""A new maintenance op is one descriptor plus its evaluator: declared once, it appears in the
group's graph, in the table's plan (what ``icelake plan`` shows), in the checks' healers, in the
effect verdicts, in the run state's codec and in the run's metadata (issue 39)."""

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import ClassVar

import pytest

from icelake_assets.maintenance.ops import chain
from icelake_assets.maintenance.ops.chain import MaintenanceOp, judge_effects, op_named
from icelake_assets.maintenance.results.base import RESULT_CLASSES, OpResult
from icelake_assets.maintenance.results.codec import decode_result, encode
from icelake_assets.maintenance.results.effect import OpEffect
from icelake_assets.orchestration.assets.graph import build_group_asset
from icelake_assets.orchestration.assets.run_metadata import run_metadata
from icelake_assets.orchestration.assets.run_state import RunState
from icelake_assets.orchestration.tables.table_groups import group_tables
from icelake_assets.planning import op_plans
from icelake_assets.planning.decision import Decision
from icelake_assets.planning.op_plans import OpPlan, healers
from icelake_assets.planning.table import decide_table
from icelake_assets.settings import Policy
from icelake_assets_tests.conftest import discovered_table
from icelake_assets_tests.orchestration.assets.test_graph import AFTER, BEFORE, HEALTH, POLICY, _validation
from icelake_assets_tests.planning.test_findings import stats


@dataclass(frozen=True, kw_only=True)
class ProbeResult(OpResult):
    op: ClassVar[str] = "probe_files"
    files_seen: int = 0

    def metrics(self) -> dict[str, int | None]:
        return {"probe/files": self.files_seen}

    def did(self) -> str:
        return f"{self.files_seen} files probed"


def _probe(spark_fn, ref, table, policy, stats_fn) -> ProbeResult:
    return ProbeResult(acted=True, reason="probed", files_seen=3)


PROBE_PLAN = OpPlan(
    "probe_files", ("small_files",), "probes files", lambda i: Decision("probe_files", True, "due")
)
PROBE = MaintenanceOp(
    PROBE_PLAN,
    ProbeResult,
    _probe,
    lambda r, after, p, others: OpEffect(r.op, "effective", "probed"),
    "probe",
)


@pytest.fixture
def declared(monkeypatch):
    monkeypatch.setattr(op_plans, "OP_PLANS", (*op_plans.OP_PLANS, PROBE_PLAN))
    monkeypatch.setattr(chain, "MAINTENANCE_OPS", (*chain.MAINTENANCE_OPS, PROBE))


def test_a_new_op_declared_once_appears_in_the_graph_the_plan_and_the_metadata(declared):
    [group] = group_tables([discovered_table("t")], 1, now=datetime(2026, 1, 1, tzinfo=UTC))
    graph = build_group_asset(group).node_def
    assert "probe_files" in graph.node_dict  # type: ignore[attr-defined]
    # It runs after the last op before it and validation after it.
    [dep] = graph.dependency_structure.input_to_upstream_outputs_for_node("probe_files").values()  # type: ignore[attr-defined]
    assert dep[0].node_name == "compute_statistics"
    assert "probe_files" in decide_table(stats(), Policy(), "enforce").acting
    assert (
        healers("small_files") == ("rewrite_data_files", "probe_files") and op_named("probe_files") is PROBE
    )

    result = ProbeResult(acted=True, reason="probed", files_seen=3, duration_s=0.5)
    assert RESULT_CLASSES["probe_files"] is ProbeResult and decode_result(encode(result)) == result
    [effect] = judge_effects([result], None, None)  # type: ignore[arg-type]  # its own check needs neither
    state = RunState(table="c.ns.t", before_snapshot_id=1, before=BEFORE, ops=(result,))
    md = run_metadata(state, AFTER, _validation(), [effect], "effective", HEALTH, POLICY, None)
    assert md["why/probe"].value == "acted: probed" and md["effect/probe"].value == "effective: probed"
    assert md["probe/files"].value == 3 and md["time/probe"].value == 0.5
    assert "probe_files: 3 files probed" in md["change"].value
