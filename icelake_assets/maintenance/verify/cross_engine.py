"""Cross-engine proof: after maintenance the table is read by Spark, pyiceberg and DuckDB (its
iceberg extension, loaded offline from the ``duckdb-extension-iceberg`` / ``-avro`` wheels), and all
three must agree on the row count and a column checksum.

The checksum is one every engine computes identically: the sum of the first integer column, else
the summed character length of the first string column, else the non-null count of the first column.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast
from urllib.parse import unquote, urlparse, urlsplit

import pyarrow.compute as pc
from pyiceberg.table import Table
from pyiceberg.types import IntegerType, LongType, StringType
from pyspark.sql import SparkSession, functions as F

from icelake_assets.catalog.connection import TableRef, current_snapshot_id
from icelake_assets.maintenance.spark.procedures import table_identifier
from icelake_assets.partitions.quoting import quote_identifier
from icelake_assets.types import IcelakeError

_EXTENSIONS = ("duckdb_extension_avro", "duckdb_extension_iceberg")


class CrossEngineError(IcelakeError, RuntimeError):
    """An engine could not read the table (the message names it and the cause)."""


@dataclass(frozen=True)
class EngineRead:
    engine: str
    rows: int
    checksum: int


@dataclass(frozen=True)
class CrossEngineResult:
    column: str
    kind: str  # sum, length, count
    reads: tuple[EngineRead, ...] = field(default_factory=tuple)

    @property
    def ok(self) -> bool:
        return len({(r.rows, r.checksum) for r in self.reads}) == 1

    def describe(self) -> str:
        return ", ".join(
            f"{r.engine}: {r.rows} rows, {self.kind}({self.column}) = {r.checksum}" for r in self.reads
        )


def checksum_column(table: Table) -> tuple[str, str]:
    """(column, kind) of the checksum: a top-level integer column, else a string one, else the first."""
    fields = table.schema().fields
    for f in fields:
        if isinstance(f.field_type, (IntegerType, LongType)):
            return f.name, "sum"
    for f in fields:
        if isinstance(f.field_type, StringType):
            return f.name, "length"
    return fields[0].name, "count"


def _local(uri: str) -> str:
    parsed = urlparse(uri)
    return unquote(parsed.path) if parsed.scheme == "file" else uri


def extension_path(package: str) -> str:
    """The extension file a duckdb-extension-* wheel ships (found in its package folder)."""
    try:
        module = importlib.import_module(package)
    except ImportError as err:
        raise CrossEngineError(f"DuckDB extension wheel {package!r} is not installed: {err}") from err
    files = sorted(Path(module.__path__[0]).rglob("*.duckdb_extension"))
    if not files:
        raise CrossEngineError(f"package {package!r} holds no .duckdb_extension file")
    return str(files[-1])


def _duckdb_string(text: str) -> str:
    """A DuckDB string literal (standard SQL: a quote is doubled, backslashes are plain)."""
    return "'" + text.replace("'", "''") + "'"


def _duckdb_s3_secret(props: Mapping[str, Any]) -> str:
    """A DuckDB S3 secret from the table's pyiceberg FileIO properties (the catalog's s3.*): DuckDB's
    httpfs reads the same objects with the same endpoint and keys (else its own credential chain)."""
    options = {"TYPE": "s3"}
    endpoint = props.get("s3.endpoint")
    if endpoint:
        parts = urlsplit(str(endpoint))
        options["ENDPOINT"] = _duckdb_string(parts.netloc or parts.path)
        options["USE_SSL"] = "true" if parts.scheme != "http" else "false"
        style = str(props.get("s3.path-style-access", "true")).lower() in ("true", "1", "yes")
        options["URL_STYLE"] = _duckdb_string("path" if style else "vhost")
    for key, option in (
        ("s3.access-key-id", "KEY_ID"),
        ("s3.secret-access-key", "SECRET"),
        ("s3.session-token", "SESSION_TOKEN"),
        ("s3.region", "REGION"),
    ):
        value = props.get(key) or props.get(key.replace("s3.", "client."))
        if value:
            options[option] = _duckdb_string(str(value))
    if "KEY_ID" not in options and str(props.get("s3.anonymous", "")).lower() != "true":
        options["PROVIDER"] = "credential_chain"
    return "CREATE SECRET icelake_s3 (" + ", ".join(f"{k} {v}" for k, v in options.items()) + ")"


def duckdb_read(table: Table, column: str, kind: str) -> EngineRead:
    import duckdb

    con = duckdb.connect()
    try:
        for package in _EXTENSIONS:
            con.execute(f"LOAD {_duckdb_string(extension_path(package))}")
        if urlsplit(table.metadata_location).scheme in ("s3", "s3a", "s3n"):
            con.execute(f"LOAD {_duckdb_string(extension_path('duckdb_extension_httpfs'))}")
            try:
                con.execute(_duckdb_s3_secret(table.io.properties))
            except duckdb.Error as err:  # a parser error quotes the statement, keys included
                raise CrossEngineError(
                    f"DuckDB refused the S3 settings of {table.metadata_location}: {type(err).__name__}"
                ) from None
        col = '"' + column.replace('"', '""') + '"'
        expr = {
            "sum": f"coalesce(sum({col}), 0)",
            "length": f"coalesce(sum(length({col})), 0)",
            "count": f"count({col})",
        }[kind]
        location = _local(table.metadata_location)
        row = con.execute(f"SELECT count(*), {expr} FROM iceberg_scan(?)", [location]).fetchone()
        rows, checksum = cast(tuple[int, Any], row)  # an aggregate: always one row
    except duckdb.Error as err:
        raise CrossEngineError(f"DuckDB could not read {table.metadata_location}: {err}") from err
    finally:
        con.close()
    return EngineRead("duckdb", int(rows), int(checksum))


def pyiceberg_read(table: Table, column: str, kind: str, snapshot_id: int | None) -> EngineRead:
    data = table.scan(selected_fields=(column,), snapshot_id=snapshot_id).to_arrow()[column]
    if kind == "sum":
        checksum = pc.sum(data).as_py() or 0
    elif kind == "length":
        checksum = pc.sum(pc.utf8_length(data)).as_py() or 0
    else:
        checksum = len(data) - data.null_count
    return EngineRead("pyiceberg", len(data), int(checksum))


def spark_read(
    spark: SparkSession, ref: TableRef, column: str, kind: str, snapshot_id: int | None
) -> EngineRead:
    reader = spark.read.format("iceberg")
    if snapshot_id is not None:
        reader = reader.option("snapshot-id", str(int(snapshot_id)))
    col = F.col(quote_identifier(column))
    agg = {
        "sum": F.coalesce(F.sum(col), F.lit(0)),
        "length": F.coalesce(F.sum(F.length(col)), F.lit(0)),
        "count": F.count(col),
    }[kind]
    row = reader.load(table_identifier(ref)).agg(F.count(F.lit(1)).alias("n"), agg.alias("c")).collect()[0]
    return EngineRead("spark", int(row["n"]), int(row["c"]))


def cross_engine_check(spark: SparkSession, ref: TableRef, table: Table) -> CrossEngineResult:
    """Read the table's current snapshot with the three engines."""
    table.refresh()
    snapshot_id = current_snapshot_id(table)
    column, kind = checksum_column(table)
    reads = (
        spark_read(spark, ref, column, kind, snapshot_id),
        pyiceberg_read(table, column, kind, snapshot_id),
        duckdb_read(table, column, kind),
    )
    return CrossEngineResult(column, kind, reads)
