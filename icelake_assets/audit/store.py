"""The audit log: an Iceberg table in the lake, appended with pyiceberg, readable by any engine.

Default identifier ``<catalog>.icelake.audit_log``; the ``icelake`` namespace is excluded from
discovery, so the product never maintains (and audits) its own log. The table is created on first
append. One append = one Iceberg commit. Concurrent appenders (a sensor and several runs in other
processes) race on the catalog's optimistic commit. The loser gets ``CommitFailedException``;
pyiceberg's transaction retries it itself (``commit.retry.*`` table properties, tuned below for a log
of small commits) with the same snapshot id and data files, and if those retries run out this module
retries once more with a new transaction over the *same* data files. So no record is lost, none is
written twice and no data file is orphaned by a retry.
"""

from __future__ import annotations

import json
import os
import random
import re
import socket
import time
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa
from pyiceberg.catalog import Catalog
from pyiceberg.exceptions import (
    CommitFailedException,
    NoSuchNamespaceError,
    NoSuchTableError,
)
from pyiceberg.expressions import AlwaysTrue, And, BooleanExpression, EqualTo, GreaterThanOrEqual
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table import Table
from pyiceberg.transforms import DayTransform
from pyiceberg.types import (
    DoubleType,
    ListType,
    LongType,
    NestedField,
    StringType,
    TimestamptzType,
)

from icelake_assets.audit.internal_tables import APPEND_ONLY_PROPERTIES, create_internal_table, trim_history
from icelake_assets.audit.records import AuditRecord, dumps, sequence_of_records
from icelake_assets.catalog.connection import open_catalog
from icelake_assets.settings import INTERNAL_NAMESPACE, Settings
from icelake_assets.types import IcelakeError

DEFAULT_TABLE = f"{INTERNAL_NAMESPACE}.audit_log"
_NAME_PART = re.compile(r"^[A-Za-z0-9_\-]+$")

# Columns are matched by name (pyiceberg assigns fresh ids on create); new ones are added by union_by_name.
AUDIT_SCHEMA = Schema(
    NestedField(1, "record_id", StringType(), required=True),
    NestedField(2, "recorded_at", TimestamptzType(), required=True),
    NestedField(3, "table_name", StringType(), required=True),
    NestedField(4, "run_id", StringType(), required=False),
    NestedField(5, "trigger", StringType(), required=True),
    NestedField(6, "kind", StringType(), required=True),
    NestedField(7, "op", StringType(), required=False),
    NestedField(8, "decision", StringType(), required=True),
    NestedField(9, "reason", StringType(), required=False),
    NestedField(10, "signals", StringType(), required=False, doc="JSON"),
    NestedField(11, "policy", StringType(), required=False, doc="JSON"),
    NestedField(12, "partitions", ListType(101, StringType(), element_required=True), required=False),
    NestedField(13, "partitions_reason", StringType(), required=False),
    NestedField(14, "failed_partitions", ListType(102, StringType(), element_required=True), required=False),
    NestedField(15, "writer_check", StringType(), required=False, doc="JSON"),
    NestedField(16, "cost_estimate_bytes", LongType(), required=False),
    NestedField(17, "snapshot_before", LongType(), required=False),
    NestedField(18, "snapshot_after", LongType(), required=False),
    NestedField(19, "results", StringType(), required=False, doc="JSON"),
    NestedField(20, "rolled_back_to", LongType(), required=False),
    NestedField(21, "duration_s", DoubleType(), required=False),
)
# Daily partitions: `since` queries prune by day, and old days can be compacted or dropped as a unit.
AUDIT_SPEC = PartitionSpec(
    PartitionField(source_id=2, field_id=1000, transform=DayTransform(), name="recorded_day")
)
AUDIT_PROPERTIES = {
    "comment": "icelake_assets audit trail: one row per maintenance decision and per op",
    **APPEND_ONLY_PROPERTIES,
}
_JSON_FIELDS = ("signals", "policy", "writer_check", "results")
_COLUMNS = tuple(f.name for f in AUDIT_SCHEMA.fields)


class AuditLogError(IcelakeError, RuntimeError):
    """The audit table cannot be created, read or appended; the message names the table and cause."""


def parse_identifier(text: str) -> tuple[str, ...]:
    """``namespace.table`` (namespace in ``icelake``) → pyiceberg identifier; anything else is refused."""
    parts = tuple(text.split(".")) if isinstance(text, str) else ()
    if len(parts) < 2 or not all(_NAME_PART.match(p) for p in parts):
        raise ValueError(
            f"invalid audit table {text!r}: expected namespace.table of letters, digits, '_' or '-'"
        )
    if parts[0] != INTERNAL_NAMESPACE:
        raise ValueError(
            f"invalid audit table {text!r}: it must live in the {INTERNAL_NAMESPACE!r} namespace, which "
            "discovery skips (a maintained audit table would audit its own maintenance)"
        )
    return parts


def _to_row(r: AuditRecord) -> dict[str, Any]:
    row = {name: getattr(r, name) for name in _COLUMNS}
    for name in _JSON_FIELDS:
        row[name] = None if row[name] is None else dumps(row[name])
    row["partitions"] = list(r.partitions)
    row["failed_partitions"] = list(r.failed_partitions)
    return row


def _from_row(row: dict[str, Any]) -> AuditRecord:
    values = {k: v for k, v in row.items() if k in _COLUMNS}
    for name in _JSON_FIELDS:
        if values.get(name) is not None:
            values[name] = json.loads(values[name])
    for name in ("partitions", "failed_partitions"):
        values[name] = tuple(values.get(name) or ())
    for name in ("signals", "policy", "results"):
        if values.get(name) is None:
            values[name] = {}
    values["reason"] = values.get("reason") or ""
    return AuditRecord(**values)


class AuditLog:
    """Append-only audit records in an Iceberg table.

    ``append(records)`` writes one data file per day touched and commits once, retrying conflicts
    with backoff; ``records(...)`` reads them back (oldest first). A disabled log accepts records and
    writes nothing, so callers need no ``if`` around auditing.
    """

    def __init__(
        self,
        catalog: Catalog,
        table: str = DEFAULT_TABLE,
        enabled: bool = True,
        max_attempts: int = 5,
        max_snapshots: int = 50,
    ) -> None:
        self.catalog = catalog
        self.identifier = parse_identifier(table)
        self.enabled = enabled
        if max_attempts < 1:
            raise ValueError(f"max_attempts must be >= 1, got {max_attempts}")
        self.max_attempts = max_attempts
        # Every append adds a snapshot to metadata.json; past this many the oldest are expired
        # (metadata only: in an append-only table every data file stays referenced).
        self.max_snapshots = max_snapshots
        self._table: Table | None = None

    @classmethod
    def from_settings(cls, settings: Settings, catalog: Catalog | None = None) -> AuditLog:
        """The log configured in ``settings.audit`` (catalog defaults to the first configured one)."""
        name = settings.audit.catalog or next(iter(settings.catalogs))
        cat = catalog if catalog is not None else open_catalog(settings, name)
        return cls(cat, settings.audit.table, enabled=settings.audit.enabled)

    @property
    def name(self) -> str:
        return ".".join((self.catalog.name, *self.identifier))

    # -- table lifecycle -------------------------------------------------------------------------

    def table(self, create: bool = True) -> Table | None:
        """The audit table, created (with its namespace) on first use when ``create``."""
        if self._table is not None:
            return self._table
        try:
            self._table = self.catalog.load_table(self.identifier)
        except (NoSuchTableError, NoSuchNamespaceError):
            if not create:
                return None
            self._table = self._create()
        except Exception as err:
            raise AuditLogError(f"audit table {self.name} cannot be loaded: {err}") from err
        try:
            self._upgrade(self._table)
        except CommitFailedException:  # another process upgraded it at the same moment: check again
            self._upgrade(self._table.refresh())
        return self._table

    def _create(self) -> Table:
        try:
            return create_internal_table(
                self.catalog, self.identifier, AUDIT_SCHEMA, AUDIT_SPEC, AUDIT_PROPERTIES
            )
        except Exception as err:
            raise AuditLogError(f"audit table {self.name} cannot be created: {err}") from err

    def _upgrade(self, table: Table) -> None:
        """A log created by an older version gains new columns and properties; a changed type is refused."""
        existing = table.schema()
        missing = [f for f in AUDIT_SCHEMA.fields if f.name not in existing.column_names]
        for f in AUDIT_SCHEMA.fields:
            if f.name in existing.column_names and str(existing.find_field(f.name).field_type) != str(
                f.field_type
            ):
                raise AuditLogError(
                    f"audit table {self.name}: column {f.name!r} is {existing.find_field(f.name).field_type}, "
                    f"expected {f.field_type}; point settings audit.table to a new table"
                )
        if missing:
            with table.update_schema() as update:
                update.union_by_name(AUDIT_SCHEMA)
        props = {
            k: v for k, v in AUDIT_PROPERTIES.items() if k != "format-version" and k not in table.properties
        }
        if props:
            with table.transaction() as tx:
                tx.set_properties(props)

    # -- writing ---------------------------------------------------------------------------------

    def append(self, records: AuditRecord | Sequence[AuditRecord]) -> int:
        """Append records in one commit; returns how many were written (0 when disabled or empty)."""
        items = sequence_of_records(records)
        if not self.enabled or not items:
            return 0
        ids = [r.record_id for r in items]
        if len(set(ids)) != len(ids):
            dup = next(i for i in ids if ids.count(i) > 1)
            raise ValueError(f"record_id {dup} appears more than once in one batch: each record is one row")
        table = self.table()
        assert table is not None
        table.refresh()  # a stale table would lose its first commit attempt for nothing
        arrow = pa.Table.from_pylist([_to_row(r) for r in items], schema=table.schema().as_arrow())
        data_files = self._write_files(table, arrow)
        props = {
            "icelake.audit.records": str(len(items)),
            "icelake.audit.writer": f"{socket.gethostname()}:{os.getpid()}",
        }
        for attempt in range(1, self.max_attempts + 1):
            try:
                with table.transaction() as tx:
                    with tx.update_snapshot(snapshot_properties=props).merge_append() as app:
                        for f in data_files:
                            app.append_data_file(f)
                break
            except CommitFailedException as err:  # pyiceberg's own retries ran out
                if attempt == self.max_attempts:
                    raise AuditLogError(
                        f"audit table {self.name}: {len(items)} records not committed after "
                        f"{attempt} attempts of concurrent commits: {err}"
                    ) from err
                # Exponential backoff with jitter: two appenders must not retry in lockstep.
                time.sleep(min(2.0, 0.02 * 2 ** (attempt - 1)) * random.uniform(0.5, 1.5))
                table.refresh()
        self._trim_history(table)
        return len(items)

    def _write_files(self, table: Table, arrow: pa.Table) -> list:
        # Transaction.append writes its files inside the transaction, so a new transaction after
        # pyiceberg's retries ran out would write them again and orphan the first copy. Writing them once
        # here (with the writer pyiceberg's append uses) lets every attempt commit the very same files.
        from icelake_assets import private_api

        md = table.metadata
        private_api.check_pyarrow_schema_compatible(
            md.schema(), provided_schema=arrow.schema, format_version=md.format_version
        )
        return list(
            private_api.dataframe_to_data_files(
                table_metadata=md, df=arrow, io=table.io, write_uuid=uuid.uuid4()
            )
        )

    def _trim_history(self, table: Table) -> None:
        trim_history(table, self.max_snapshots)

    # -- reading ---------------------------------------------------------------------------------

    def records(
        self, table: str | None = None, since: datetime | None = None, run_id: str | None = None
    ) -> list[AuditRecord]:
        """Records oldest first, optionally of one table (``catalog.namespace.table``), at or after
        ``since`` (timezone-aware), of one Dagster run. An audit table not created yet holds none."""
        if since is not None and (not isinstance(since, datetime) or since.tzinfo is None):
            raise ValueError(f"since must be a timezone-aware datetime, got {since!r}")
        tbl = self.table(create=False)
        if tbl is None:
            return []
        tbl.refresh()
        conditions: list[BooleanExpression] = []
        if table is not None:
            conditions.append(EqualTo(term="table_name", value=str(table)))
        if since is not None:
            conditions.append(GreaterThanOrEqual(term="recorded_at", value=since.astimezone(UTC).isoformat()))
        if run_id is not None:
            conditions.append(EqualTo(term="run_id", value=run_id))
        row_filter: BooleanExpression = AlwaysTrue()
        for c in conditions:
            row_filter = c if isinstance(row_filter, AlwaysTrue) else And(row_filter, c)
        rows = tbl.scan(row_filter=row_filter).to_arrow().to_pylist()
        out = [_from_row(r) for r in rows]
        out.sort(key=lambda r: (r.recorded_at, r.record_id))
        return out
