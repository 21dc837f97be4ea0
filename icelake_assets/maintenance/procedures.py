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


def quote_identifier(part: str) -> str:
    """A Spark SQL identifier in backticks; a backtick inside is doubled."""
    return "`" + part.replace("`", "``") + "`"


def sql_string(value: str) -> str:
    """A Spark SQL string literal; backslashes and quotes escaped (Spark unescapes literals)."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


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
    named = {"table": table_identifier(ref, with_catalog=False), **{k: v for k, v in args.items() if v is not None}}
    rendered = ", ".join(f"{name} => {sql_value(value)}" for name, value in named.items())
    sql = f"CALL {quote_identifier(ref.catalog)}.system.{procedure}({rendered})"
    return spark.sql(sql).collect()


def _single(rows: list[Row]) -> dict[str, Any]:
    return rows[0].asDict() if rows else {}


def expire_snapshots(spark: SparkSession, ref: TableRef, older_than: datetime, retain_last: int) -> dict[str, Any]:
    return _single(call_procedure(spark, ref, "expire_snapshots", older_than=older_than, retain_last=retain_last))


def rewrite_data_files(
    spark: SparkSession,
    ref: TableRef,
    strategy: str = "binpack",
    sort_order: str | None = None,
    options: Mapping[str, str] | None = None,
    where: str | None = None,
) -> dict[str, Any]:
    if strategy not in ("binpack", "sort"):
        raise ValueError(f"unknown rewrite strategy {strategy!r} (binpack, sort)")
    return _single(
        call_procedure(
            spark, ref, "rewrite_data_files", strategy=strategy, sort_order=sort_order,
            options=dict(options) if options else None, where=where,
        )
    )


def rewrite_manifests(spark: SparkSession, ref: TableRef) -> dict[str, Any]:
    return _single(call_procedure(spark, ref, "rewrite_manifests"))


def rollback_to_snapshot(spark: SparkSession, ref: TableRef, snapshot_id: int) -> dict[str, Any]:
    return _single(call_procedure(spark, ref, "rollback_to_snapshot", snapshot_id=int(snapshot_id)))


def count_rows(spark: SparkSession, ref: TableRef, snapshot_id: int | None = None) -> int:
    """A real count through Spark, at ``snapshot_id`` or the current snapshot."""
    reader = spark.read.format("iceberg")
    if snapshot_id is not None:
        reader = reader.option("snapshot-id", str(int(snapshot_id)))
    return reader.load(table_identifier(ref)).count()
