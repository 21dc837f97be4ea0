"""The health sensor's part of health per partition (checks/partition_checks.py): per tick, which
partitions' checks to report, and one run of ``icelake_partition_checks`` that reports them.

A table whose metadata changed (or that is due again, sensors/health_cursor.py) has its partitions
graded from the statistics its table-level checks just read (no second read of the manifests); the
partitions whose digest differs from the one last reported, or asked for, are named in the tick's one
run request (planning/partition_changes.py decides which). Keys the asset's partitions do not hold yet
(a day past the window the code location loaded, a dynamic key not added yet) are left out until they
do. An unchanged tick asks for nothing.

A request's run is followed by its id (tag ``icelake/partition_report``): its success makes the digests
it reported the reported ones, its failure makes its tables due again (one runs query per tick while
requests are pending). A tick names at most MAX_KEYS_PER_RUN partitions; the tables past it are due."""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from dagster import (
    AssetCheckKey,
    DagsterRunStatus,
    PartitionsDefinition,
    RunRequest,
    RunsFilter,
    SensorEvaluationContext,
)
from pyiceberg.table import Table

from icelake_assets.catalog.discovery import DiscoveredTable
from icelake_assets.health.table_stats import TableStats
from icelake_assets.orchestration.checks.partition_checks import PARTITION_CHECK_NAMES, valid_keys
from icelake_assets.orchestration.checks.partition_report_job import REPORT_OP, REPORT_TAG
from icelake_assets.orchestration.names import table_asset_key
from icelake_assets.orchestration.sensors.health_cursor import HealthCursor, RunOutcome
from icelake_assets.partitions.layout import partition_layout
from icelake_assets.planning.partition_changes import changed_partitions, report_digests
from icelake_assets.planning.partition_health import PartitionReport, partition_health
from icelake_assets.settings import Policy
from icelake_assets.types import TableRef

MAX_KEYS_PER_RUN = 10_000  # a run's config stays small (~200 kB), its events bounded (3 per key)
_FIRST_CHECK = next(iter(PARTITION_CHECK_NAMES.values()))
_ENDED = {
    DagsterRunStatus.SUCCESS: RunOutcome.SUCCEEDED,
    DagsterRunStatus.FAILURE: RunOutcome.FAILED,
    DagsterRunStatus.CANCELED: RunOutcome.FAILED,
}


def partitions_defs(
    context: SensorEvaluationContext, tables: Iterable[DiscoveredTable]
) -> dict[TableRef, PartitionsDefinition]:
    """The tables that carry partition checks in the loaded code location, with their partitions."""
    repository = context.repository_def
    if repository is None:
        return {}
    graph = repository.asset_graph
    out = {}
    for t in tables:
        key = AssetCheckKey(table_asset_key(t.ref), _FIRST_CHECK)
        if graph.has(key) and (pdef := graph.get(key).partitions_def) is not None:
            out[t.ref] = pdef
    return out


def settle_requests(context: SensorEvaluationContext, cursor: HealthCursor) -> None:
    """The outcome of the pending requests' runs (a request without a run counts as failed: the
    daemon creates it right after the tick that asked)."""
    if not cursor.pending:
        return
    runs = context.instance.get_runs(filters=RunsFilter(tags={REPORT_TAG: list(cursor.pending)}))
    found = {run.tags.get(REPORT_TAG): run.status for run in runs}
    cursor.settle(
        {
            r: _ENDED.get(found[r], RunOutcome.WAITING) if r in found else RunOutcome.FAILED
            for r in cursor.pending
        }
    )


@dataclass
class PartitionReports:
    """One tick's partition reports: what it asks for, by table and key (None: a key now empty)."""

    cursor: HealthCursor
    asked: dict[str, dict[str, str | None]] = field(default_factory=dict)
    keys: int = 0

    def compare(
        self,
        context: SensorEvaluationContext,
        ref: TableRef,
        table: Table,
        stats: TableStats,
        policy: Policy,
        partitions_def: PartitionsDefinition,
        report: PartitionReport | None = None,
    ) -> int:
        """Grade the table's partitions from ``stats`` (``report``: already graded from them) and ask
        for the changed ones; how many it asked for. A table past the tick's budget is due on the next
        tick instead."""
        name = str(ref)
        if self.keys >= MAX_KEYS_PER_RUN:
            self.cursor.due.add(name)
            return 0
        if report is None:
            report = partition_health(stats, policy, partition_layout(table, with_earliest=False))
        digests = report_digests(report)
        held = valid_keys(partitions_def, digests, context.instance)
        current = {k: d for k, d in digests.items() if k in held}
        changes = changed_partitions(current, self.cursor.known(name))
        self.cursor.due.discard(name)
        if changes:
            self.asked[name] = {k: current.get(k) for k in changes.keys}
            self.keys += len(changes.keys)
        return len(changes.keys)

    def run_request(self) -> RunRequest | None:
        """The tick's one run of ``icelake_partition_checks``, recorded as pending in the cursor."""
        if not self.asked:
            return None
        request_id = str(time.time_ns())  # orders the requests; unique per sensor
        self.cursor.request(request_id, self.asked)
        config = {"tables": {t: sorted(keys) for t, keys in self.asked.items()}}
        return RunRequest(
            run_key=f"partition_report_{request_id}",
            run_config={"ops": {REPORT_OP: {"config": config}}},
            tags={REPORT_TAG: request_id},
        )


def forget_missing(cursor: HealthCursor, tables: Mapping[TableRef, PartitionsDefinition]) -> None:
    """Tables that left the lake, or no longer carry partition checks: their digests go."""
    names = {str(ref) for ref in tables}
    for table in [t for t in cursor.partitions if t not in names] + [t for t in cursor.due if t not in names]:
        cursor.forget(table)
