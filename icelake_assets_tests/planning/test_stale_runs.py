"""When a run is stale: its lease names a dead process of this host, is not renewed, or never came."""

from icelake_assets.planning.stale_runs import (
    LEASE_TTL_SECONDS,
    MAX_RUNTIME_CEILING_SECONDS,
    MAX_RUNTIME_FLOOR_SECONDS,
    NO_LEASE_GRACE_SECONDS,
    Lease,
    RunView,
    lost_worker_reason,
    max_runtime_seconds,
    stale_reason,
)

NOW = 1_000_000.0


def _view(status="STARTED", since=NOW - 60, lease=None):
    return RunView("r1", status, since, lease)


def test_a_lease_naming_a_dead_process_of_this_host_is_stale_at_once_a_live_one_never():
    lease = Lease("here", 4242, NOW - 1)
    said = stale_reason(_view(lease=lease), NOW, "here", lambda lease: lease.pid != 4242)
    assert said is not None and "PID 4242 on here" in said and "is gone" in said
    assert stale_reason(_view(lease=lease), NOW, "here", lambda lease: True) is None
    # The storage was down for longer than the TTL: a live worker of this host is still not stale.
    silent = Lease("here", 4242, NOW - LEASE_TTL_SECONDS * 10)
    assert stale_reason(_view(lease=silent), NOW, "here", lambda lease: True) is None


def test_a_lease_of_another_host_is_judged_by_its_renewals_only():
    fresh = Lease("elsewhere", 1, NOW - LEASE_TTL_SECONDS + 5)
    old = Lease("elsewhere", 1, NOW - LEASE_TTL_SECONDS - 5)
    dead = lambda lease: False  # noqa: E731 - a PID of another host says nothing here
    assert stale_reason(_view(lease=fresh), NOW, "here", dead) is None
    said = stale_reason(_view(lease=old), NOW, "here", dead)
    assert said is not None and "has not renewed its lease" in said


def test_a_run_without_a_lease_gets_a_grace_then_is_stale_starting_or_started():
    for status in ("STARTING", "STARTED"):
        assert stale_reason(_view(status, since=NOW - 10), NOW, "here", lambda p: True) is None
        said = stale_reason(
            _view(status, since=NOW - NO_LEASE_GRACE_SECONDS - 1), NOW, "here", lambda p: True
        )
        assert said is not None and "never took its lease" in said and status.lower() in said


def test_queued_and_finished_runs_are_never_stale():
    for status in ("QUEUED", "NOT_STARTED", "SUCCESS", "FAILURE", "CANCELING"):
        assert stale_reason(_view(status, since=0), NOW, "here", lambda p: False) is None


def test_a_failed_run_lost_its_worker_when_its_lease_was_never_released_and_the_worker_is_gone():
    gone, lives = (lambda lease: False), (lambda lease: True)
    killed = Lease("here", 4242, NOW - 5)
    said = lost_worker_reason(killed, NOW, "here", gone)
    assert said is not None and "PID 4242 on here" in said and "died before its run ended" in said
    assert lost_worker_reason(killed, NOW, "here", lives) is None  # still exiting
    assert lost_worker_reason(Lease("here", 4242, NOW - 5, released=True), NOW, "here", gone) is None
    assert lost_worker_reason(None, NOW, "here", gone) is None  # no lease: nothing says it was killed
    elsewhere = Lease("elsewhere", 1, NOW - LEASE_TTL_SECONDS - 5)
    assert "not renewed" in (lost_worker_reason(elsewhere, NOW, "here", gone) or "")
    fresh = Lease("elsewhere", 1, NOW - 5)
    assert lost_worker_reason(fresh, NOW, "here", gone) is None


def test_a_lease_reads_back_and_garbage_reads_as_none():
    lease = Lease("h", 7, 12.5, released=True, started=99)
    assert Lease.loads(lease.dumps()) == lease
    assert Lease.loads("") is None and Lease.loads("{not json") is None and Lease.loads('{"host": 1}') is None


def test_the_max_runtime_grows_with_the_planned_rewrite_between_a_floor_and_a_ceiling():
    assert max_runtime_seconds(0) == MAX_RUNTIME_FLOOR_SECONDS
    assert MAX_RUNTIME_FLOOR_SECONDS < max_runtime_seconds(10 * 1024**3) < MAX_RUNTIME_CEILING_SECONDS
    assert max_runtime_seconds(10**18) == MAX_RUNTIME_CEILING_SECONDS
