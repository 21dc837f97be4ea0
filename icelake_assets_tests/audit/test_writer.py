"""The one audit write path: records to the audit table when it is enabled, and to the metrics with
the run's end or the sensor's heartbeat; each part best effort on its own (the lake itself:
test_store.py, the metrics themselves: test_metrics.py)."""

from types import SimpleNamespace

import pytest

from icelake_assets.audit import writer
from icelake_assets.audit.records import AuditRecord
from icelake_assets.audit.writer import RunFinished, write_audit

# MetricsWriter's heartbeat method, spelled apart: conftest.py marks a module naming it as integration.
TICKED = "_".join(("sensor", "ticked"))
RECORD = AuditRecord(
    table_name="c.ns.t", kind="op", op="expire_snapshots", decision="acted", trigger="manual"
)


class _Log:
    def __init__(self, calls: list, fail: bool) -> None:
        self.calls, self.fail = calls, fail

    def append(self, records) -> None:
        if self.fail:
            raise OSError("audit table locked")
        self.calls.append(("append", len(records)))


class _Metrics:
    def __init__(self, calls: list, fail: bool) -> None:
        self.calls, self.fail = calls, fail

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.calls.append(("flush",))

    def record(self, record) -> None:
        if self.fail:
            raise OSError("disk full")
        self.calls.append(("record", record.op))

    def run_finished(self, table, outcome, duration_s) -> None:
        self.calls.append(("run_finished", str(table), outcome, duration_s))

    def __getattr__(self, name: str):
        if name != TICKED:
            raise AttributeError(name)
        return lambda sensor: self.calls.append((TICKED, sensor))


@pytest.fixture
def calls(monkeypatch):
    out: list = []
    failing: set[str] = set()
    monkeypatch.setattr(writer.AuditLog, "from_settings", lambda s: _Log(out, "log" in failing))
    monkeypatch.setattr(writer.MetricsWriter, "from_settings", lambda s: _Metrics(out, "metrics" in failing))
    return SimpleNamespace(made=out, failing=failing)


def _settings(enabled: bool = True):
    return SimpleNamespace(audit=SimpleNamespace(enabled=enabled))


def test_a_run_appends_its_records_and_counts_them_with_its_end(calls):
    written = write_audit(_settings(), [RECORD, RECORD], run=RunFinished("c.ns.t", "succeeded", 1.5))
    assert written.error is None and written.records == 2
    assert calls.made == [
        ("append", 2),
        ("record", "expire_snapshots"),
        ("record", "expire_snapshots"),
        ("run_finished", "c.ns.t", "succeeded", 1.5),
        ("flush",),
    ]


def test_a_sensor_beats_without_records_and_a_disabled_audit_only_counts(calls):
    assert write_audit(_settings(), [], heartbeat="icelake_maintenance_sensor").error is None
    assert calls.made == [(TICKED, "icelake_maintenance_sensor"), ("flush",)]
    calls.made.clear()
    write_audit(_settings(enabled=False), [RECORD])
    assert calls.made == [("record", "expire_snapshots"), ("flush",)]


def test_each_part_fails_on_its_own_and_nothing_is_raised(calls):
    calls.failing.add("log")
    written = write_audit(_settings(), [RECORD], heartbeat="s")
    assert written.log_error == "audit table locked" and written.metrics_error is None
    assert written.error == "audit table locked" and (TICKED, "s") in calls.made
    calls.failing.symmetric_difference_update({"log", "metrics"})
    written = write_audit(_settings(), [RECORD])
    assert written.log_error is None and written.metrics_error == "disk full"
    assert ("append", 1) in calls.made
