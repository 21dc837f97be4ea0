"""Expiry decides on what it would actually remove: nothing younger than snapshots.min_age_hours,
nothing among the newest min_keep, nothing a branch or tag points to."""

from datetime import datetime, timedelta, timezone

from icelake_assets.maintenance.plan import decide_expire, expire_cutoff
from icelake_assets.settings import Policy
from icelake_assets_tests.health.test_findings import history

POLICY = Policy()  # max_count 100, max_age_hours 120, min_keep 5, min_age_hours 24


def test_300_fresh_snapshots_are_over_the_count_but_none_may_go():
    stats = history(300, 1.0)  # the demo: 300 snapshots written within the last hour
    decision = decide_expire(stats, POLICY)
    assert not decision.act
    assert "300 snapshots > 100, but none may go yet: 5 of the newest 5 kept, 295 younger than 24 h" in decision.reason
    assert decision.signals["expirable_snapshots"] == 0
    now = datetime.fromtimestamp(stats.evaluated_at, timezone.utc)
    assert expire_cutoff(stats, POLICY) == now - timedelta(hours=24)  # not `now`: the minimum age holds


def test_over_the_count_only_what_is_older_than_the_minimum_age_goes():
    stats = history(300, 30.0)  # the oldest 295 are 30 h old (1 ms apart), so all but the newest 5 may go
    decision = decide_expire(stats, POLICY)
    assert decision.act and decision.signals["expirable_snapshots"] == 295
    assert "295 older than 24 h beyond the newest 5 will go" in decision.reason


def test_under_the_count_the_age_limit_decides():
    assert not decide_expire(history(50, 119.0), POLICY).act
    old = decide_expire(history(50, 121.0), POLICY)
    assert old.act and old.signals["expirable_snapshots"] == 45 and old.signals["expire_older_than_hours"] == 120
