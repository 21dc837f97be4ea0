"""The run model's guard: a launch waits for a run queued or running, or for its failed runs' backoff."""

import pytest

from icelake_assets.planning.guards import run_guard
from icelake_assets.planning.history import Runs

NOW = 1_800_000_000.0


@pytest.mark.parametrize(
    ("runs", "kind", "reason"),
    [
        pytest.param(None, None, "", id="no runs known"),
        pytest.param(Runs(), None, "", id="nothing queued, nothing failed"),
        pytest.param(Runs(in_flight="run 1"), "in_flight", "(run 1)", id="in flight"),
        pytest.param(
            Runs(in_flight="run 1", failures_in_a_row=3, retry_at=NOW + 5),
            "in_flight",
            "",
            id="in flight wins",
        ),
        pytest.param(
            Runs(failures_in_a_row=3, retry_at=NOW + 5, failure_reason="denied"),
            "backoff",
            "the last 3 maintenance run(s) failed; retrying after 2027-01-15 08:00:05 UTC (last failure: denied)",
            id="backoff",
        ),
        pytest.param(
            # Two failures of the table, then a killed worker: the wait is the interruption's, and so
            # is the reason (it said "the last 2 maintenance run(s) failed", or "an outage").
            Runs(
                failures_in_a_row=2,
                retry_at=NOW + 5,
                failure_reason="the run's worker was lost",
                interrupted=True,
            ),
            "backoff",
            "the last maintenance run was interrupted (not the table's failure); retrying after",
            id="interrupted after failures",
        ),
        pytest.param(Runs(failures_in_a_row=3, retry_at=NOW), None, "", id="backoff over"),
    ],
)
def test_run_guard(runs, kind, reason):
    held = run_guard(runs, NOW)
    assert (held[0] if held else None) == kind
    assert reason in (held[1] if held else "")
