"""A table's column statistics from its metadata alone (pyiceberg, no Spark): the Puffin statistics
files the table metadata references (``statistics``, ``partition-statistics``), which one serves the
current snapshot, how many rows that snapshot held, and which columns carry an NDV sketch.

Iceberg's ``compute_table_stats`` writes one Puffin file per snapshot with an
``apache-datasketches-theta-v1`` blob per column, its estimate in the blob's ``ndv`` property (also
copied into the table metadata, so no file is read here); ``compute_partition_stats`` writes a
partition statistics file. Readers differ in which file they use: Spark 3.5 (Iceberg's SparkScan,
with ``spark.sql.cbo.enabled``) only the current snapshot's, Trino the newest among its ancestors.
The planning core (planning/statistics.py) judges these facts; :func:`read_puffin_ndv` reads a
written file back (the op's proof, the tests).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from pyiceberg.table import Table
from pyiceberg.table.puffin import PuffinFile

from icelake_assets.catalog.ancestry import ancestors

# The blob type of an NDV sketch (Iceberg's StandardBlobTypes.APACHE_DATASKETCHES_THETA_V1) and the
# property holding its estimate (NDVSketchUtil.APACHE_DATASKETCHES_THETA_V1_NDV_PROPERTY).
NDV_BLOB = "apache-datasketches-theta-v1"
NDV_PROPERTY = "ndv"


@dataclass(frozen=True)
class StatisticsFacts:
    """What the metadata says about statistics for the current snapshot.

    ``columns``: the current schema's top-level primitive columns (field id, name), what Iceberg's
    compute_table_stats takes by default; ``key_columns``: those the sort order or the partition spec
    derive from. The ``snapshot_id`` ... ``ndv`` fields describe the newest table statistics file
    among the current snapshot and its ancestors (None: none), ``commits_behind`` how many commits
    back that snapshot is (0: the current one), ``rows_at`` its total records."""

    current_rows: int | None = None  # the current snapshot's total-records (summary)
    columns: tuple[tuple[int, str], ...] = ()
    key_columns: tuple[str, ...] = ()
    partitioned: bool = False
    snapshot_id: int | None = None
    path: str | None = None
    file_bytes: int = 0
    ndv: dict[int, int] = field(default_factory=dict)  # field id -> estimated distinct values
    rows_at: int | None = None
    commits_behind: int | None = None
    partition_snapshot_id: int | None = None  # the newest partition statistics among the same snapshots
    partition_path: str | None = None
    files: int = 0  # table statistics files the metadata references (every snapshot's)
    partition_files: int = 0

    @property
    def current(self) -> bool:
        """The statistics are the current snapshot's own (the only ones Spark 3.5 reads)."""
        return self.commits_behind == 0

    def column_names(self) -> tuple[str, ...]:
        return tuple(name for _, name in self.columns)

    def field_id(self, name: str) -> int | None:
        return next((i for i, n in self.columns if n == name), None)


def _total_records(summary: Any) -> int | None:
    value = summary.additional_properties.get("total-records") if summary is not None else None
    return int(value) if value is not None and str(value).isdigit() else None


def statistics_facts(table: Table) -> StatisticsFacts:
    """The facts of the table's current snapshot (see StatisticsFacts), from its metadata only."""
    md = table.metadata
    schema = table.schema()
    columns = tuple((f.field_id, f.name) for f in schema.fields if f.field_type.is_primitive)
    top = dict(columns)
    sources = [f.source_id for f in table.sort_order().fields] + [f.source_id for f in table.spec().fields]
    keys = tuple(dict.fromkeys(top[s] for s in sources if s in top))
    table_files = {s.snapshot_id: s for s in md.statistics}
    partition_files = {s.snapshot_id: s for s in md.partition_statistics}
    facts = StatisticsFacts(
        columns=columns,
        key_columns=keys,
        partitioned=not table.spec().is_unpartitioned(),
        files=len(md.statistics),
        partition_files=len(md.partition_statistics),
    )
    snap = table.current_snapshot()
    if snap is None:
        return facts
    out: dict[str, Any] = {"current_rows": _total_records(snap.summary)}
    if not (table_files or partition_files):
        return replace(facts, **out)
    for behind, ancestor in enumerate(ancestors(table, snap)):
        found = table_files.get(ancestor.snapshot_id)
        if found is not None and "snapshot_id" not in out:
            out.update(
                snapshot_id=found.snapshot_id,
                path=found.statistics_path,
                file_bytes=found.file_size_in_bytes,
                ndv={
                    b.fields[0]: int((b.properties or {}).get(NDV_PROPERTY, -1))
                    for b in found.blob_metadata
                    if b.type == NDV_BLOB and b.fields
                },
                rows_at=_total_records(ancestor.summary),
                commits_behind=behind,
            )
        part = partition_files.get(ancestor.snapshot_id)
        if part is not None and "partition_snapshot_id" not in out:
            out.update(partition_snapshot_id=part.snapshot_id, partition_path=part.statistics_path)
        if "snapshot_id" in out and "partition_snapshot_id" in out:
            break
    return replace(facts, **out)


def read_puffin_ndv(table: Table, path: str) -> dict[int, int]:
    """The NDV estimate of every theta-sketch blob of the Puffin file at ``path``, by field id, read
    from the file itself (its footer) through the table's FileIO."""
    with table.io.new_input(path).open() as stream:
        puffin = PuffinFile(stream.read())
    return {
        b.fields[0]: int(b.properties[NDV_PROPERTY])
        for b in puffin.footer.blobs
        if b.type == NDV_BLOB and b.fields and NDV_PROPERTY in b.properties
    }
