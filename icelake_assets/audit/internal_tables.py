"""The product's own append-only Iceberg tables (the audit log, audit/store.py; the orphan candidates,
audit/orphan_candidates.py): their shared table properties, their creation on first use by any
number of processes at once, and the trimming of their snapshot history."""

from __future__ import annotations

from datetime import UTC, datetime

from pyiceberg.catalog import Catalog
from pyiceberg.exceptions import CommitFailedException, NamespaceAlreadyExistsError, TableAlreadyExistsError
from pyiceberg.partitioning import PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table import Table

# One snapshot per append: merge manifests and drop old metadata files so a table stays cheap to read;
# pyiceberg's own commit retry (defaults: 4 retries from 100 ms): appends are tiny, runs of many tables
# append at once, so retry more, sooner.
APPEND_ONLY_PROPERTIES = {
    "format-version": "2",
    "commit.manifest-merge.enabled": "true",
    "write.metadata.delete-after-commit.enabled": "true",
    "write.metadata.previous-versions-max": "20",
    "commit.retry.num-retries": "10",
    "commit.retry.min-wait-ms": "20",
    "commit.retry.max-wait-ms": "2000",
}


def create_internal_table(
    catalog: Catalog,
    identifier: tuple[str, ...],
    schema: Schema,
    spec: PartitionSpec,
    properties: dict[str, str],
) -> Table:
    """The table, with its namespace, created now or by whichever process got there first."""
    namespace = identifier[:-1]
    try:
        catalog.create_namespace(namespace)
    except NamespaceAlreadyExistsError:
        pass  # another process created it first
    except Exception:
        # pyiceberg's SQL catalog checks, then inserts: a process creating it at the same moment
        # surfaces as the database's unique-constraint error. Fine if the namespace is there now.
        if not catalog.namespace_exists(namespace):
            raise
    try:
        return catalog.create_table(identifier, schema=schema, partition_spec=spec, properties=properties)
    except TableAlreadyExistsError:
        return catalog.load_table(identifier)


def trim_history(table: Table, max_snapshots: int) -> None:
    """Past ``max_snapshots``, the oldest half of the snapshots is expired (metadata only: in an
    append-only table every data file stays referenced)."""
    snapshots = table.metadata.snapshots
    if len(snapshots) <= max_snapshots:
        return
    cutoff_ms = sorted(s.timestamp_ms for s in snapshots)[-max(1, max_snapshots // 2)]
    try:
        table.maintenance.expire_snapshots().older_than(
            datetime.fromtimestamp(cutoff_ms / 1000, tz=UTC)
        ).commit()
    except CommitFailedException:
        table.refresh()  # someone else committed meanwhile: the next append trims instead
