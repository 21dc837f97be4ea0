"""The orphan finding and decision with a recovery window: removable past it, pending in it, and the
run that records new candidates (else their window would never start)."""

from __future__ import annotations

from icelake_assets.health.findings import Severity
from icelake_assets.health.orphan_phases import PendingSummary
from icelake_assets.planning.orphans import decide_orphans, orphan_finding
from icelake_assets.settings import Policy

POLICY = Policy.model_validate({"orphans": {"max_count": 0, "recovery_window_hours": 24}})


def test_all_pending_is_waiting_not_failing():
    pending = PendingSummary(24, files=3, bytes=300, unmarked=0, first_removable_at=86_400.0)
    finding = orphan_finding(0, 0, POLICY, pending=pending)
    assert finding.severity == Severity.OK
    assert "3 more (300 B) pending their 24 h recovery window" in finding.summary
    assert "1970-01-02 00:00 UTC" in finding.summary and "not stuck" in finding.recommendation
    assert (
        finding.metrics["orphan_pending_bytes"] == 300 and finding.metrics["first_removable_at"] == 86_400.0
    )
    decision = decide_orphans(0, 0, POLICY, pending)
    assert not decision.act and "pending" in decision.reason


def test_unrecorded_orphans_launch_the_run_that_records_them():
    pending = PendingSummary(24, files=2, bytes=200, unmarked=2, first_removable_at=86_400.0)
    assert decide_orphans(0, 0, POLICY, pending).act
    finding = orphan_finding(0, 0, POLICY, pending=pending)
    assert finding.severity == Severity.WARN and "not yet recorded" in finding.summary


def test_removable_past_the_threshold_act_as_before():
    decision = decide_orphans(2, 20, POLICY, PendingSummary(24, files=1, bytes=10))
    assert decision.act and decision.reason.startswith("2 orphan files older than 72 h > 0")
    assert orphan_finding(2, 20, POLICY, pending=PendingSummary(24)).severity != Severity.OK
