"""The chaos soak's approval of the retention table's first expiry (bench/soak/retention.py): a failed
approval run materializes nothing, so its report names the failing step, its error and that error's
cause, read from the run's events in the instance (an in-process run against an ephemeral instance)."""

from dagster import DagsterInstance, Failure, job, op

from bench.soak.retention import Approval, run_failure
from bench.soak.retention_checks import retention_outcomes


class CatalogRefused(Exception):
    pass


@op
def expire_data() -> None:
    try:
        raise CatalogRefused("the catalog refused the commit")
    except CatalogRefused as err:
        raise Failure(description="expire_data failed on chaos.retention") from err


@op
def fine() -> None:
    pass


@job
def failing() -> None:
    expire_data()


@job
def passing() -> None:
    fine()


def test_a_failed_run_names_its_failing_step_with_the_error_and_its_cause():
    with DagsterInstance.ephemeral() as instance:
        failed = failing.execute_in_process(instance=instance, raise_on_error=False)
        passed = passing.execute_in_process(instance=instance, raise_on_error=False)
        reason = run_failure(instance, failed.run_id)
        assert run_failure(instance, passed.run_id) == ""
    step, _, chain = reason.partition(": ")
    assert step == "expire_data"
    error, _, cause = chain.partition(" <- ")
    assert "expire_data failed on chaos.retention" in error
    assert "CatalogRefused: the catalog refused the commit" in cause


def test_the_report_says_why_the_approval_did_not_act():
    failed = Approval(run_id="abcdef1234", status="FAILURE", failure="expire_data: Failure: x <- y")
    (approval, _) = retention_outcomes(None, failed, "not checked")
    assert not approval.ok
    assert approval.details == ("run abcdef12 FAILURE after 0 tries: failed: expire_data: Failure: x <- y",)
    acted = Approval(status="SUCCESS", expire_data="acted: 40 rows expired")
    assert acted.acted and acted.reason == "acted: 40 rows expired"
    assert Approval(detail="the table awaited no approval within 300 s").reason.startswith("the table")
