"""``icelake_partition_checks``: one run reports the partition checks of the partitions the health
sensor found changed (sensors/partition_reports.py), outside any materialization of the tables.

A run, not run-less events: Dagster 1.13 stores one run-less evaluation per partition of a check, so a
partition's second report must come from a run (partition_checks.py). The run reads each table's
metadata again (its evaluations are the truth when it runs), names the partitions in its config, and
fails naming the tables it could not read after reporting the others: the sensor then asks again for
that run's partitions.

No ``from __future__ import annotations``: Dagster reads the op's config class from its annotation."""

from dagster import Config, Failure, OpExecutionContext, in_process_executor, job, op

from icelake_assets.orchestration.checks.partition_checks import (
    PARTITION_CHECK_NAMES,
    keys_a_run_will_report,
    partition_check_evaluations,
)
from icelake_assets.orchestration.resources import IcelakeResource
from icelake_assets.types import TableRef

PARTITION_REPORT_JOB = "icelake_partition_checks"
REPORT_OP = "report_partition_checks"
# The sensor's request id on the run: the sensor reads the run's outcome by it.
REPORT_TAG = "icelake/partition_report"


class PartitionReportConfig(Config):
    tables: dict[str, list[str]]  # table (catalog.namespace.table) -> the partition keys to report


@op(
    name=REPORT_OP,
    out={},
    description="Reports the per-partition checks of the partitions named in its config",
)
def report_partition_checks(
    context: OpExecutionContext, config: PartitionReportConfig, icelake: IcelakeResource
):
    # A generator: each table's evaluations are written as they come (a failure raised at the end
    # would drop the events logged before it).
    names = set(PARTITION_CHECK_NAMES.values())
    failed: list[str] = []
    reported = 0
    for table, asked in sorted(config.tables.items()):
        ref = TableRef.parse(table)
        try:
            # Partitions a maintenance run in progress will report once it maintained them: its
            # report must stay the latest (partition_checks.keys_a_run_will_report).
            later = keys_a_run_will_report(context.instance, ref, asked)
            keys = [k for k in asked if k not in later]
            evaluations = partition_check_evaluations(context.instance, icelake, ref, keys, names)
        except Exception as err:  # one table that cannot be read must not keep the others unreported
            context.log.error(f"{table}: partition checks not reported: {err}")
            failed.append(f"{table}: {err}")
            continue
        yield from evaluations
        reported += len(keys)
    context.log.info(
        f"partition checks reported for {reported} partition(s) of {len(config.tables)} table(s)"
    )
    if failed:
        raise Failure(
            description=f"{len(failed)} of {len(config.tables)} tables' partition checks not reported: "
            + " | ".join(failed[:20])
        )


@job(
    name=PARTITION_REPORT_JOB,
    executor_def=in_process_executor,
    description="Per-partition checks of the partitions whose files changed (requested by the health "
    "sensor; pyiceberg metadata only, no Spark)",
)
def partition_report_job() -> None:
    report_partition_checks()
