"""What the sensor remembers decides whether a tick reads a table at all, and how old its finding is."""

import pytest

from icelake_assets.planning.history import Runs, Seen, finding_since, needs_evaluation
from icelake_assets.planning.outcome import Outcome

NOW = 1_800_000_000.0
FILE = "00002-b.metadata.json"


def seen(outcome: Outcome, file: str = FILE, since: float | None = None) -> Seen:
    return Seen(file, outcome, NOW - 60, since)


@pytest.mark.parametrize(
    ("before", "scan_due", "runs", "read"),
    [
        pytest.param(None, False, None, True, id="never seen"),
        pytest.param(seen(Outcome.SKIPPED), False, None, False, id="unchanged and fine"),
        pytest.param(seen(Outcome.SKIPPED, "00001-a.metadata.json"), False, None, True, id="a new commit"),
        pytest.param(seen(Outcome.SKIPPED), True, None, True, id="orphan scan due"),
        pytest.param(seen(Outcome.HELD), False, None, False, id="held: waits for a change or approval"),
        pytest.param(seen(Outcome.DEFERRED), False, None, True, id="deferred: rechecked"),
        pytest.param(seen(Outcome.ERROR), False, None, True, id="error: rechecked"),
        pytest.param(seen(Outcome.QUEUED_BY_PRIORITY), False, None, True, id="queued: ranked again"),
        pytest.param(
            seen(Outcome.LAUNCHED), False, Runs(failures_in_a_row=1), True, id="its run failed since"
        ),
        pytest.param(
            seen(Outcome.LAUNCHED),
            False,
            Runs(in_flight="run x", failures_in_a_row=1),
            False,
            id="retry in flight",
        ),
        pytest.param(seen(Outcome.LAUNCHED), False, Runs(), False, id="launched, no failure"),
        pytest.param(
            seen(Outcome.LAUNCHED, "00001-a.metadata.json"),
            True,
            Runs(in_flight="run x"),
            False,
            id="launched, its run committing: held until it ends",
        ),
        pytest.param(
            seen(Outcome.IN_FLIGHT), False, Runs(in_flight="run x"), False, id="in flight: held until it ends"
        ),
        pytest.param(seen(Outcome.IN_FLIGHT), False, Runs(), True, id="in flight before, its run ended"),
    ],
)
def test_needs_evaluation(before, scan_due, runs, read):
    assert needs_evaluation(before, FILE, scan_due, runs) is read


@pytest.mark.parametrize(
    ("before", "found"),
    [
        pytest.param(None, NOW, id="new"),
        pytest.param(seen(Outcome.DEFERRED, since=NOW - 600), NOW - 600, id="still waiting: carries over"),
        pytest.param(seen(Outcome.SKIPPED, since=NOW - 600), NOW, id="was fine: a new finding"),
        pytest.param(seen(Outcome.HELD), NOW, id="waiting, age unknown"),
    ],
)
def test_finding_since(before, found):
    assert finding_since(before, NOW) == found
