"""When a run is stale: its lease names a dead process of this host, is not renewed, or never came."""

from icelake_assets.planning.stale_runs import (
    FENCE_GRACE_SECONDS,
    LEASE_RENEW_SECONDS,
    LEASE_TTL_SECONDS,
    MAX_RUNTIME_CEILING_SECONDS,
    MAX_RUNTIME_FLOOR_SECONDS,
    NO_LEASE_GRACE_SECONDS,
    SELF_FENCE_SECONDS,
    WATCH_SECONDS,
    Lease,
    RunView,
    launch_killed_reason,
    lost_worker_reason,
    max_runtime_seconds,
    stale_reason,
)

NOW = 1_000_000.0


HERE = "vm/boot-1/pid:[1]"  # this sensor's host identity (processes.host_identity)
CONTAINER = "vm/boot-1/pid:[2]"  # the same host name and boot, a PID namespace of its own


def _view(status="STARTED", since=NOW - 60, lease=None, unchanged_for=None):
    return RunView("r1", status, since, lease, unchanged_for)


def _lease(identity=HERE, pid=4242, released=False, host="vm"):
    return Lease(host, pid, NOW - 1, released, identity, 100, 3, pid)


def test_a_lease_naming_a_dead_run_worker_of_this_identity_is_stale_at_once_a_live_one_never():
    lease = _lease()
    said = stale_reason(_view(lease=lease), NOW, HERE, lambda lease: lease.pid != 4242)
    assert said is not None and "PID 4242 on vm" in said and "is gone" in said
    assert stale_reason(_view(lease=lease), NOW, HERE, lambda lease: True) is None
    # The storage was down for longer than the TTL: a live worker of this host is still not stale.
    silent = _view(lease=lease, unchanged_for=LEASE_TTL_SECONDS * 10)
    assert stale_reason(silent, NOW, HERE, lambda lease: True) is None


def test_a_step_process_that_ended_does_not_make_its_live_run_stale():
    """The multiprocess executor: the first step's process released the lease and is gone; the run
    worker it names lives on (on the old code its PID was the step's: the run was failed)."""
    released = _lease(released=True)
    assert stale_reason(_view(lease=released), NOW, HERE, lambda lease: True) is None


def test_a_lease_of_another_pid_namespace_on_the_same_host_is_never_judged_by_its_pid():
    """A container with host networking: same host name, its own PIDs (PID 1 there is not ours)."""
    lease = _lease(identity=CONTAINER, pid=1)
    asked = []
    alive = lambda lease: asked.append(lease) or False  # noqa: E731
    assert stale_reason(_view(lease=lease, unchanged_for=5), NOW, HERE, alive) is None
    assert not asked  # its PID was never looked up here


def test_a_lease_elsewhere_is_judged_by_how_long_the_sensor_saw_it_unchanged_on_its_own_clock():
    lease = _lease(identity="other/boot/pid:[1]")
    dead = lambda lease: False  # noqa: E731 - a PID of another host says nothing here
    # Its writer's clock is a day behind: that alone says nothing (it is never compared with ours).
    skewed = Lease("other", 1, NOW - 86400, False, "other/boot/pid:[1]", None, 7, 1)
    assert stale_reason(_view(lease=skewed, unchanged_for=1.0), NOW, HERE, dead) is None
    assert stale_reason(_view(lease=lease, unchanged_for=LEASE_TTL_SECONDS - 5), NOW, HERE, dead) is None
    assert stale_reason(_view(lease=lease, unchanged_for=None), NOW, HERE, dead) is None  # first sight
    said = stale_reason(_view(lease=lease, unchanged_for=LEASE_TTL_SECONDS + 5), NOW, HERE, dead)
    assert said is not None and "has not renewed its lease" in said
    # Released between step processes elsewhere: a user's own step may run for hours without us.
    between = _lease(identity="other/boot/pid:[1]", released=True)
    assert stale_reason(_view(lease=between, unchanged_for=10 * LEASE_TTL_SECONDS), NOW, HERE, dead) is None


def test_a_run_without_a_lease_gets_a_grace_then_is_stale_starting_or_started():
    for status in ("STARTING", "STARTED"):
        assert stale_reason(_view(status, since=NOW - 10), NOW, HERE, lambda p: True) is None
        said = stale_reason(_view(status, since=NOW - NO_LEASE_GRACE_SECONDS - 1), NOW, HERE, lambda p: True)
        assert said is not None and "never took its lease" in said and status.lower() in said


def test_queued_and_finished_runs_are_never_stale():
    for status in ("QUEUED", "NOT_STARTED", "SUCCESS", "FAILURE", "CANCELING"):
        assert stale_reason(_view(status, since=0), NOW, HERE, lambda p: False) is None


def test_a_failed_run_lost_its_worker_when_its_lease_was_never_released_and_the_worker_is_gone():
    gone, lives = (lambda lease: False), (lambda lease: True)
    killed = _lease()
    said = lost_worker_reason(killed, NOW, HERE, gone, None)
    assert said is not None and "PID 4242 on vm" in said and "died before its run ended" in said
    assert lost_worker_reason(killed, NOW, HERE, lives, None) is None  # still exiting
    assert lost_worker_reason(_lease(released=True), NOW, HERE, gone, None) is None
    assert lost_worker_reason(None, NOW, HERE, gone, None) is None  # no lease: nothing says it was killed
    elsewhere = _lease(identity="other/b/pid:[1]")
    assert "not renewed" in (lost_worker_reason(elsewhere, NOW, HERE, gone, LEASE_TTL_SECONDS + 5) or "")
    assert lost_worker_reason(elsewhere, NOW, HERE, gone, 5.0) is None


def test_a_worker_killed_at_launch_is_told_from_one_that_exited_by_itself():
    killed = (
        "DagsterLaunchFailedError: GRPC server: Subprocess for abc terminated unexpectedly with exit code -9"
    )
    said = launch_killed_reason(killed)
    assert said is not None and "-9" in said and "launched" in said
    assert launch_killed_reason("Subprocess for abc terminated unexpectedly with exit code 1") is None
    assert launch_killed_reason("ModuleNotFoundError: no module named x") is None


def test_the_relaunch_after_a_verdict_waits_longer_than_a_fenced_run_may_still_act():
    from icelake_assets.orchestration.runs.model import OUTAGE_RETRY_SECONDS

    assert WATCH_SECONDS < FENCE_GRACE_SECONDS <= OUTAGE_RETRY_SECONDS
    assert SELF_FENCE_SECONDS + LEASE_RENEW_SECONDS < LEASE_TTL_SECONDS


def test_a_lease_reads_back_and_garbage_reads_as_none():
    lease = _lease(released=True)
    assert Lease.loads(lease.dumps()) == lease
    assert Lease.loads("") is None and Lease.loads("{not json") is None and Lease.loads('{"host": 1}') is None
    # An earlier version's lease (no identity): judged by its renewals alone, never by its PID.
    old = Lease.loads('{"host": "vm", "pid": 7, "renewed_at": 12.5, "released": false, "created": 3.0}')
    assert old is not None and old.identity is None and old.ticks is None


def test_the_max_runtime_grows_with_the_planned_rewrite_between_a_floor_and_a_ceiling():
    assert max_runtime_seconds(0) == MAX_RUNTIME_FLOOR_SECONDS
    assert MAX_RUNTIME_FLOOR_SECONDS < max_runtime_seconds(10 * 1024**3) < MAX_RUNTIME_CEILING_SECONDS
    assert max_runtime_seconds(10**18) == MAX_RUNTIME_CEILING_SECONDS
