"""The orphan candidates (health/orphan_phases.py): an append-only Iceberg table of events beside the
audit log, ``<audit catalog>.icelake.orphan_candidates``, created on first use.

Why append-only events, not one row per (table, path) updated in place: runs of different tables
record at the same time, and an append never rewrites another table's rows, so concurrent commits only
race on the catalog's optimistic commit, which pyiceberg retries (``commit.retry.*`` below). A keyed
overwrite would delete and re-add rows, and a retried overwrite must never drop what another table's
run just added. Crash safety comes from the order a run writes: its new ``seen`` and ``dropped``
events before it deletes anything, its ``deleted`` events after. A crash before the first commit
records nothing (the files wait one more window); a crash between a deletion and its ``deleted``
event leaves a live candidate whose file is gone, which the next run drops ("no longer listed"):
nothing is deleted early, nothing referenced is deleted. Partitioned by table, so a table's read
prunes the others'."""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime

import pyarrow as pa
from pyiceberg.catalog import Catalog
from pyiceberg.exceptions import (
    CommitFailedException,
    NoSuchNamespaceError,
    NoSuchTableError,
)
from pyiceberg.expressions import EqualTo
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table import Table
from pyiceberg.transforms import IdentityTransform
from pyiceberg.types import LongType, NestedField, StringType, TimestamptzType

from icelake_assets.audit.internal_tables import APPEND_ONLY_PROPERTIES, create_internal_table, trim_history
from icelake_assets.catalog.connection import open_catalog
from icelake_assets.health.orphan_phases import Candidate, CandidateEvent, live_candidates
from icelake_assets.settings import INTERNAL_NAMESPACE, Settings
from icelake_assets.types import IcelakeError

DEFAULT_TABLE = (INTERNAL_NAMESPACE, "orphan_candidates")
CANDIDATE_SCHEMA = Schema(
    NestedField(1, "event_id", StringType(), required=True),
    NestedField(2, "recorded_at", TimestamptzType(), required=True),
    NestedField(3, "table_name", StringType(), required=True),
    NestedField(4, "path", StringType(), required=True),
    NestedField(5, "size", LongType(), required=True),
    NestedField(6, "mtime_ns", LongType(), required=False),
    NestedField(7, "event", StringType(), required=True, doc="seen | deleted | dropped"),
    NestedField(8, "reason", StringType(), required=False),
    NestedField(9, "run_id", StringType(), required=False),
)
CANDIDATE_SPEC = PartitionSpec(
    PartitionField(source_id=3, field_id=1000, transform=IdentityTransform(), name="table_name")
)
CANDIDATE_PROPERTIES = {
    "comment": "icelake_assets orphan candidates: seen, deleted and dropped events per table and file",
    **APPEND_ONLY_PROPERTIES,
}
_MAX_SNAPSHOTS = 50  # metadata only: in an append-only table every data file stays referenced


class OrphanCandidatesError(IcelakeError, RuntimeError):
    """The candidates table cannot be created, read or appended; the message names it and the cause."""


class OrphanCandidates:
    """The store of health/orphan_phases.py's CandidateStore protocol."""

    def __init__(self, catalog: Catalog, identifier: tuple[str, ...] = DEFAULT_TABLE) -> None:
        self.catalog = catalog
        self.identifier = identifier
        self._table: Table | None = None

    @classmethod
    def from_settings(cls, settings: Settings, catalog: Catalog | None = None) -> OrphanCandidates:
        """In the audit's catalog (default: the first configured one)."""
        name = settings.audit.catalog or next(iter(settings.catalogs))
        return cls(catalog if catalog is not None else open_catalog(settings, name))

    @property
    def name(self) -> str:
        return ".".join((self.catalog.name, *self.identifier))

    def table(self, create: bool = True) -> Table | None:
        if self._table is not None:
            return self._table.refresh()
        try:
            self._table = self.catalog.load_table(self.identifier)
        except (NoSuchTableError, NoSuchNamespaceError):
            if not create:
                return None
            self._table = self._create()
        except Exception as err:
            raise OrphanCandidatesError(
                f"orphan candidates table {self.name} cannot be loaded: {err}"
            ) from err
        return self._table

    def _create(self) -> Table:
        try:
            return create_internal_table(
                self.catalog, self.identifier, CANDIDATE_SCHEMA, CANDIDATE_SPEC, CANDIDATE_PROPERTIES
            )
        except Exception as err:
            raise OrphanCandidatesError(
                f"orphan candidates table {self.name} cannot be created: {err}"
            ) from err

    def events(self, table: str) -> list[CandidateEvent]:
        """Every event of ``table`` (``catalog.namespace.table``), unordered; none before the first run."""
        tbl = self.table(create=False)
        if tbl is None:
            return []
        rows = tbl.scan(row_filter=EqualTo(term="table_name", value=table)).to_arrow().to_pylist()
        return [
            CandidateEvent(
                r["path"],
                r["size"],
                r["mtime_ns"],
                r["event"],
                r["reason"] or "",
                r["recorded_at"].timestamp(),
            )
            for r in rows
        ]

    def candidates(self, table: str) -> list[Candidate]:
        return live_candidates(self.events(table))

    def record(
        self, table: str, events: Sequence[CandidateEvent], now: float, run_id: str | None = None
    ) -> int:
        """Append ``events`` of ``table`` at ``now`` (epoch s) in one commit; returns how many."""
        if not events:
            return 0
        tbl = self.table()
        assert tbl is not None
        at = datetime.fromtimestamp(now, tz=UTC)
        rows = [
            {
                "event_id": str(uuid.uuid4()),
                "recorded_at": at,
                "table_name": table,
                "path": e.path,
                "size": e.size,
                "mtime_ns": e.mtime_ns,
                "event": e.event,
                "reason": e.reason or None,
                "run_id": run_id,
            }
            for e in events
        ]
        props = {"icelake.writer": f"{socket.gethostname()}:{os.getpid()}", "icelake.table": table}
        try:
            tbl.append(pa.Table.from_pylist(rows, schema=tbl.schema().as_arrow()), snapshot_properties=props)
        except CommitFailedException as err:  # pyiceberg's retries ran out
            raise OrphanCandidatesError(
                f"orphan candidates table {self.name}: {len(rows)} events of {table} not committed "
                f"after retrying concurrent commits: {err}"
            ) from err
        self._trim(tbl)
        return len(rows)

    def _trim(self, tbl: Table) -> None:
        trim_history(tbl, _MAX_SNAPSHOTS)
