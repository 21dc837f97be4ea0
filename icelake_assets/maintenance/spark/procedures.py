"""Typed wrappers around Iceberg's Spark procedures (``CALL <catalog>.system.*``).

Every identifier and value reaches Spark quoted: identifiers in backticks (doubled inside), strings
as escaped literals, timestamps as TIMESTAMP literals, numbers formatted from ints. Nothing is pasted.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from pyspark.sql import Row, SparkSession

from icelake_assets.catalog.connection import TableRef
from icelake_assets.maintenance.spark import actions as spark_actions, commit_tags, fencing
from icelake_assets.partitions.quoting import quote_identifier, sql_string


def table_identifier(ref: TableRef, with_catalog: bool = True) -> str:
    """The quoted multipart identifier of a table, e.g. `demo`.`taxi`.`trips`."""
    parts = [ref.catalog, *ref.namespace, ref.name] if with_catalog else [*ref.namespace, ref.name]
    return ".".join(quote_identifier(p) for p in parts)


def sql_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(int(value))
    if isinstance(value, datetime):
        utc = value.astimezone(UTC) if value.tzinfo else value
        return f"TIMESTAMP {sql_string(utc.strftime('%Y-%m-%d %H:%M:%S.%f'))}"
    if isinstance(value, Mapping):
        items = ", ".join(f"{sql_string(str(k))}, {sql_string(str(v))}" for k, v in value.items())
        return f"map({items})"
    if isinstance(value, str):
        return sql_string(value)
    raise TypeError(f"unsupported procedure argument {value!r} ({type(value).__name__})")


def call_procedure(spark: SparkSession, ref: TableRef, procedure: str, **args: Any) -> list[Row]:
    """``CALL `catalog`.system.procedure(table => '<quoted table>', name => value, ...)``."""
    if not procedure.isidentifier():
        raise ValueError(f"invalid procedure name {procedure!r}")
    named = {
        "table": table_identifier(ref, with_catalog=False),
        **{k: v for k, v in args.items() if v is not None},
    }
    rendered = ", ".join(f"{name} => {sql_value(value)}" for name, value in named.items())
    sql = f"CALL {quote_identifier(ref.catalog)}.system.{procedure}({rendered})"
    with fencing.committing(procedure):
        return spark.sql(sql).collect()


def _single(rows: list[Row]) -> dict[str, Any]:
    return rows[0].asDict() if rows else {}


def expire_snapshots(
    spark: SparkSession, ref: TableRef, older_than: datetime, retain_last: int
) -> dict[str, Any]:
    return _single(
        call_procedure(spark, ref, "expire_snapshots", older_than=older_than, retain_last=retain_last)
    )


def rewrite_data_files(
    spark: SparkSession,
    ref: TableRef,
    strategy: str = "binpack",
    sort_order: str | None = None,
    options: Mapping[str, str] | None = None,
    where: str | None = None,
) -> dict[str, Any]:
    """The rewrite_data_files procedure's work, through its action: the commits carry the run's
    snapshot properties (actions.py)."""
    if strategy not in ("binpack", "sort"):
        raise ValueError(f"unknown rewrite strategy {strategy!r} (binpack, sort)")
    return spark_actions.rewrite_data_files(spark, ref, strategy, sort_order, dict(options or {}), where)


def rewrite_position_delete_files(
    spark: SparkSession, ref: TableRef, options: Mapping[str, str] | None = None, where: str | None = None
) -> dict[str, Any]:
    """Rewrites position-delete files; with ``rewrite-all`` it takes every one in ``where`` and drops
    the deletes whose data file is gone (dangling), so a file holding only those is removed. Through
    the procedure's action: the commit carries the run's snapshot properties."""
    return spark_actions.rewrite_position_delete_files(spark, ref, dict(options or {}), where)


def remove_dangling_deletes(spark: SparkSession, ref: TableRef) -> dict[str, Any]:
    """Removes the delete files of an unpartitioned table that can match no live row, in one
    ``replace`` commit: Iceberg 1.10's RemoveDanglingDeletes rule (position deletes older than every
    live data file, equality deletes not newer than every live data file, by data sequence number).

    Iceberg's own action (``remove-dangling-deletes`` of rewrite_data_files) skips unpartitioned tables
    on the ground that every commit drops older deletes; that commit rule is strict and capped at the
    table's last sequence number, so an equality-delete file committed last before a rewrite stays for
    good. No procedure does this, hence Iceberg's Java API through py4j (the table named quoted)."""
    jvm: Any = spark._jvm
    iceberg = jvm.org.apache.iceberg
    table = iceberg.spark.Spark3Util.loadIcebergTable(spark._jsparkSession, table_identifier(ref))
    if table.specs().size() != 1 or not table.spec().isUnpartitioned():
        raise ValueError(f"{ref} is partitioned: use rewrite_data_files' remove-dangling-deletes option")
    out: dict[str, Any] = {
        "removed_position_delete_files_count": 0,
        "removed_equality_delete_files_count": 0,
        "min_data_sequence_number": None,
    }
    snap = table.currentSnapshot()
    if snap is None:
        return out
    io = table.io()
    # A manifest's min sequence number covers its live entries (MergingSnapshotProducer relies on it).
    live = [
        m.minSequenceNumber() for m in snap.dataManifests(io) if m.hasAddedFiles() or m.hasExistingFiles()
    ]
    min_seq = min(live) if live else None
    out["min_data_sequence_number"] = min_seq
    dangling = []
    for manifest in snap.deleteManifests(io):
        files = iceberg.ManifestFiles.readDeleteManifest(manifest, io, table.specs()).iterator()
        try:
            while files.hasNext():
                f = files.next()
                kind, seq = f.content().name(), f.dataSequenceNumber()
                if (
                    min_seq is None
                    or (kind == "POSITION_DELETES" and seq < min_seq)
                    or (kind == "EQUALITY_DELETES" and seq <= min_seq)
                ):
                    dangling.append(f)
                    out[f"removed_{kind.split('_')[0].lower()}_delete_files_count"] += 1
        finally:
            files.close()
    if dangling:
        rewrite = table.newRewrite().validateFromSnapshot(snap.snapshotId())
        for f in dangling:
            rewrite.deleteFile(f)
        for key, value in commit_tags.session_properties(spark).items():
            rewrite.set(key, value)
        with fencing.committing("remove_dangling_deletes"):
            rewrite.commit()
        spark.sql(f"REFRESH TABLE {table_identifier(ref)}")
    return out


def rewrite_manifests(spark: SparkSession, ref: TableRef) -> dict[str, Any]:
    """Through the procedure's action: the commit carries the run's snapshot properties."""
    return spark_actions.rewrite_manifests(spark, ref)


def rollback_to_snapshot(spark: SparkSession, ref: TableRef, snapshot_id: int) -> dict[str, Any]:
    return _single(call_procedure(spark, ref, "rollback_to_snapshot", snapshot_id=int(snapshot_id)))


def count_rows(
    spark: SparkSession, ref: TableRef, snapshot_id: int | None = None, where: str | None = None
) -> int:
    """A real count through Spark, at ``snapshot_id`` or the current snapshot; ``where``: only the rows
    matching this (already quoted) condition, Spark pruning by partition and bounds."""
    reader = spark.read.format("iceberg")
    if snapshot_id is not None:
        reader = reader.option("snapshot-id", str(int(snapshot_id)))
    rows = reader.load(table_identifier(ref))
    return int((rows.where(where) if where is not None else rows).count())
