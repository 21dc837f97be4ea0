"""The typed state between maintenance ops: appending outcomes never mutates the previous state."""

from icelake_assets.maintenance.results.codec import RESULT_CLASSES
from icelake_assets.maintenance.results.models import OpResult
from icelake_assets.orchestration.assets.run_state import RunState


def _op(name: str, acted: bool, **fields) -> OpResult:
    return RESULT_CLASSES[name](acted=acted, reason="r", duration_s=0.1, **fields)


def test_each_op_appends_its_outcome_to_a_new_state():
    start = RunState(table="c.ns.t", before_snapshot_id=7, before={"data_files": 12})
    after_expire = start.with_op(_op("expire_snapshots", False))
    after_rewrite = after_expire.with_op(_op("rewrite_data_files", True, snapshots_committed=4))
    assert start.ops == () and len(after_expire.ops) == 1 and len(after_rewrite.ops) == 2
    assert [o.op for o in after_rewrite.acted()] == ["rewrite_data_files"]
    assert after_rewrite.rewrite_commits() == 4 and after_expire.rewrite_commits() == 0
    assert after_rewrite.before_snapshot_id == 7 and after_rewrite.cross_engine is None
