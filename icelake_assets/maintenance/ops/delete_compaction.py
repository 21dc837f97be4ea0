"""The cheaper delete compaction (Dagster-free): where only position deletes are due and the data
files are not small (planning/deletes.py), the rewrite op merges each partition's position delete
files with Iceberg's rewrite_position_delete_files (``rewrite-all``, through its action: the commit
carries the run's snapshot properties) instead of rewriting the data files they point into. The data
files stay; the rows read the same (validation counts them); what it committed is measured from the
metadata."""

from __future__ import annotations

from collections.abc import Callable

from pyiceberg.table import Table
from pyspark.sql import SparkSession

from icelake_assets.catalog.ancestry import ancestors
from icelake_assets.catalog.connection import TableRef, current_snapshot_id
from icelake_assets.causes import root_cause
from icelake_assets.health.stats import MAINTENANCE_OPERATION, TableStats
from icelake_assets.maintenance.results.deletes import PositionDeletes
from icelake_assets.maintenance.spark import procedures
from icelake_assets.planning.rewrite import RewritePlan

# rewrite-all: every position delete file of the named partitions is rewritten (one file per
# partition under the delete target size), and deletes whose data file is gone are dropped.
OPTIONS = {"rewrite-all": "true"}


def commits_after(table: Table, snapshot_id: int | None) -> int:
    """Rewrite (``replace``) snapshots on the current branch after ``snapshot_id``: the commits one
    op made (writers committing meanwhile are not counted)."""
    return sum(
        s.summary is not None and s.summary.operation.value == MAINTENANCE_OPERATION
        for s in ancestors(table, until=snapshot_id)
    )


def compact_position_deletes(
    spark_fn: Callable[[], SparkSession],
    ref: TableRef,
    table: Table,
    stats_fn: Callable[[Table], TableStats],
    before: TableStats,
    rp: RewritePlan,
    where: str | None,
) -> PositionDeletes:
    """Compact the position deletes of ``rp.position_partitions`` (``where`` names them; None: the
    table has one partition or they cannot be named by a filter). A failure is recorded in the result
    (its effect says so), an outage raised (the run is retried soon)."""
    table.refresh()
    start = current_snapshot_id(table)
    parts = rp.position_partitions
    row: dict = {}
    error = None
    try:
        row = procedures.rewrite_position_delete_files(spark_fn(), ref, OPTIONS, where)
    except Exception as err:
        cause = root_cause(err)
        if cause.kind == "outage":
            raise
        error = str(cause)
    table.refresh()
    after = stats_fn(table)
    return PositionDeletes(
        partitions=parts,
        where=where,
        estimated_bytes=rp.position_delete_bytes,
        data_bytes_not_rewritten=rp.position_data_bytes,
        procedure=row,
        delete_files_before=sum(before.partitions[p].delete_files for p in parts if p in before.partitions),
        delete_files_after=sum(after.partitions[p].delete_files for p in parts if p in after.partitions),
        commits=commits_after(table, start),
        error=error,
    )
