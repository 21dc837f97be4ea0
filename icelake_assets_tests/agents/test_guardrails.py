"""The guards of `approve_maintenance` on a real audit log (SQLite catalog, pyiceberg), with the plan
and the launch stubbed (the plan's figures are the point; test_mcp.py launches for real): every op's
bytes count against the caps, a row expiry waiting for a person is refused whatever the caps, the
day's cap fails closed without its ledger, and two concurrent spending calls never both pass it."""

from __future__ import annotations

import fcntl
import threading
import time
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import pytest

from icelake_assets.agents import guardrails
from icelake_assets.agents.guardrails import GuardRefused, approve_maintenance
from icelake_assets.agents.server import build_server
from icelake_assets.audit.store import AuditLog
from icelake_assets.catalog.connection import open_catalog
from icelake_assets.operate.approve import NotAwaitingApproval
from icelake_assets.operate.plan import Estimate, OpPlan, TablePlan
from icelake_assets.settings import AuditSettings, Settings
from icelake_assets_tests.conftest import catalog_name, new_lake

GB = 1024**3
TABLE = "ns.t"
URL = "http://127.0.0.1:1"
AGENTS = {
    "capped": {"write": True, "max_rewrite_bytes_per_call": GB, "max_rewrite_bytes_per_day": 10 * GB},
    "daily": {"write": True, "max_rewrite_bytes_per_day": 600 * GB},
    "free": {"write": True},
}


def _plan(ops: dict[str, dict[str, Any]], **estimate: Any) -> TablePlan:
    """A plan held for approval whose acting ops carry ``ops``' signals and whose estimate is ``estimate``."""
    figures = {
        "rewrite_bytes": 0,
        "rewrite_files": 0,
        "rewrite_groups": 0,
        "max_rewrite_bytes": GB,
        "expirable_snapshots": 0,
        **estimate,
    }
    return TablePlan(
        table="c.ns.t",
        asset_key=("c", "ns", "t"),
        mode="enforce",
        mode_source="default",
        snapshot_id=1,
        planned_at=datetime.now(UTC),
        ops=tuple(OpPlan(op, True, "test", signals) for op, signals in ops.items()),
        orphans_evaluated=False,
        partitions=(),
        partitions_excluded={},
        position_partitions=("day=2024-01-01",) if figures.get("position_delete_bytes") else (),
        position_data_bytes=0,
        position_reason="",
        rewrite_options={},
        estimate=Estimate(**figures),
        guards="hold",
        guards_reason="over the cost cap",
        guards_details={},
        outcome="held",
        enforce="hold",
        approve_command="icelake approve c/ns/t",
    )


POSITION_DELETES = _plan({"rewrite_data_files": {}}, position_delete_bytes=500 * GB)
EXPIRY = _plan(
    {"expire_data": {"rewrite_bytes": 2 * GB}},
    expire_rows=1000,
    expire_files=10,
    expire_bytes=3 * GB,
    expire_cutoff="2024-01-01",
)
FIRST_EXPIRY = replace(EXPIRY, estimate=replace(EXPIRY.estimate, first_expiry=True))
SMALL = _plan({"rewrite_data_files": {}}, position_delete_bytes=400 * GB)  # the day cap allows one


@dataclass
class Launched:
    run_id: str

    def to_json(self) -> dict[str, Any]:
        return {"schema": "icelake.approval/v1", "run_id": self.run_id}


class Lake:
    """The stubs' record: which plan is served, which runs were launched."""

    def __init__(self, settings: Settings, plan: TablePlan) -> None:
        self.settings, self.plan, self.launched = settings, plan, list[str]()

    def approve(self, settings: Settings, ref: Any, url: str, by: str, digest: str | None = None) -> Launched:
        if digest != self.plan.digest:
            raise NotAwaitingApproval("the plan changed")
        self.launched.append(by)
        return Launched(f"run-{len(self.launched)}")


@pytest.fixture(scope="module")
def settings(tmp_path_factory) -> Settings:
    lake = new_lake(tmp_path_factory, extra={"agents": AGENTS})
    open_catalog(lake, catalog_name(lake), create=True)  # the audit log's catalog
    return lake


@pytest.fixture
def lake(settings, monkeypatch, tmp_path) -> Lake:
    # Each test its own metrics folder (the lock's) and audit table (the ledger): no spend carries over.
    name = f"icelake.audit_{tmp_path.name.replace('-', '_')}"[:60]
    own = settings.model_copy(
        update={
            "audit": AuditSettings(table=name),
            "metrics": settings.metrics.model_copy(update={"textfile_dir": str(tmp_path / "metrics")}),
        }
    )
    stub = Lake(own, SMALL)
    monkeypatch.setattr(guardrails, "plan_table", lambda s, ref, *a, **k: stub.plan)
    monkeypatch.setattr(guardrails, "approve_table", stub.approve)
    return stub


def refused(lake: Lake, agent: str) -> GuardRefused:
    with pytest.raises(GuardRefused) as caught:
        approve_maintenance(lake.settings, agent, TABLE, URL)
    assert lake.launched == [], "a refused call launched a run"
    return caught.value


def test_every_ops_bytes_count_against_the_caps(lake):
    # A 500 GB position-delete compaction rewrites no data file: it used to cost 0 against any cap.
    lake.plan = POSITION_DELETES
    err = refused(lake, "capped")
    assert err.guard == "max_rewrite_bytes_per_call", err
    assert f"{500 * GB:,} bytes" in str(err) and "position-delete compaction" in str(err)
    # A row expiry (not a first one) costs the expired rows' files plus the files it writes again.
    lake.plan = EXPIRY
    err = refused(lake, "capped")
    assert err.guard == "max_rewrite_bytes_per_call" and f"{5 * GB:,} bytes" in str(err), err
    # The day's cap counts them too: 400 GB of delete compaction, then 400 GB more is over 600 GB.
    lake.plan = SMALL
    first = approve_maintenance(lake.settings, "daily", TABLE, URL)
    assert first["price"] == {
        "rewrite_bytes": 0,
        "position_delete_bytes": 400 * GB,
        "expire_bytes": 0,
        "expire_rewrite_bytes": 0,
        "total_bytes": 400 * GB,
    }
    assert lake.launched == ["agent:daily"]
    with pytest.raises(GuardRefused) as over:
        approve_maintenance(lake.settings, "daily", TABLE, URL)
    assert over.value.guard == "max_rewrite_bytes_per_day" and "launched 1 runs" in str(over.value)
    assert lake.launched == ["agent:daily"]


def test_a_row_expiry_waiting_for_a_person_is_refused_whatever_the_caps(lake):
    lake.plan = FIRST_EXPIRY
    for agent in ("free", "capped"):
        err = refused(lake, agent)
        assert err.guard == "human_gate" and "first expiry" in str(err), err
        assert "1,000 rows" in str(err) and "icelake approve c/ns/t" in str(err)
    # Any expiry whose bounds the plan says need approval again (a changed policy, say).
    why = "the retention policy changed since the last approved expiry"
    lake.plan = replace(EXPIRY, estimate=replace(EXPIRY.estimate, expire_needs_approval=why))
    err = refused(lake, "free")
    assert err.guard == "human_gate" and why in str(err), err


def test_the_days_cap_fails_closed_without_its_ledger(lake, monkeypatch):
    off = lake.settings.model_copy(update={"audit": AuditSettings(enabled=False)})
    with pytest.raises(GuardRefused) as caught:
        approve_maintenance(off, "daily", TABLE, URL)
    assert caught.value.guard == "spend_ledger" and "audit.enabled: false" in str(caught.value)

    def unreadable(self: AuditLog, *args: Any, **kwargs: Any) -> list[Any]:
        raise OSError("the catalog database is locked")

    def unwritable(self: AuditLog, records: Any) -> int:
        raise OSError("disk full")

    with monkeypatch.context() as patch:
        patch.setattr(AuditLog, "records", unreadable)
        err = refused(lake, "daily")
        assert err.guard == "spend_ledger" and "cannot be read" in str(err) and "locked" in str(err), err
    # A spend that cannot be recorded launches nothing (the next call would not count it).
    with monkeypatch.context() as patch:
        patch.setattr(AuditLog, "append", unwritable)
        err = refused(lake, "daily")
        assert err.guard == "spend_ledger" and "disk full" in str(err), err
    # An agent without a day's cap needs no ledger.
    assert approve_maintenance(off, "free", TABLE, URL)["run_id"] == "run-1"


def test_two_concurrent_spending_calls_never_both_pass_the_days_cap(lake, monkeypatch):
    """Each call reads the ledger slowly (as a busy catalog does): without a lock across the read
    and the record, both read 0 spent and both launch."""
    read = AuditLog.records

    def slow(self: AuditLog, *args: Any, **kwargs: Any) -> list[Any]:
        found = read(self, *args, **kwargs)
        time.sleep(0.5)
        return found

    monkeypatch.setattr(AuditLog, "records", slow)
    start = threading.Barrier(2)
    outcomes: list[str] = []

    def call() -> None:
        start.wait()
        try:
            approve_maintenance(lake.settings, "daily", TABLE, URL)
            outcomes.append("launched")
        except GuardRefused as err:
            outcomes.append(err.guard)

    threads = [threading.Thread(target=call) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert sorted(outcomes) == ["launched", "max_rewrite_bytes_per_day"], outcomes
    assert len(lake.launched) == 1


def test_another_process_spending_holds_the_call_until_it_is_done(lake):
    """Servers of one lake in other processes (a stdio server per client) take the same file lock:
    held by another open file (as another process holds it), the call waits for it."""
    folder = Path(lake.settings.metrics.textfile_dir)
    folder.mkdir(parents=True, exist_ok=True)
    done = threading.Event()
    with open(folder / "agent_spend.lock", "a") as other:
        fcntl.flock(other, fcntl.LOCK_EX)

        def spend() -> None:
            approve_maintenance(lake.settings, "daily", TABLE, URL)
            done.set()

        caller = threading.Thread(target=spend)
        caller.start()
        assert not done.wait(1.5), "the call spent while another process held the lock"
        fcntl.flock(other, fcntl.LOCK_UN)
    caller.join(60)
    assert done.is_set() and lake.launched == ["agent:daily"]


def test_approve_maintenance_is_marked_destructive(settings):
    async def annotations() -> Any:
        tools = {t.name: t for t in await build_server(settings, "free", URL).list_tools()}
        return tools["approve_maintenance"].annotations

    marks = anyio.run(annotations)
    assert marks is not None and marks.destructive_hint is True and marks.read_only_hint is False
