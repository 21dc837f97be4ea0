"""Spark's ``DELETE FROM`` for row retention, its commits carrying the run's snapshot properties.

Spark's DELETE is Iceberg's: a condition every matching file satisfies whole (by partition or by its
column bounds) is a metadata-only delete (Iceberg's DeleteFiles: files dropped, none written);
otherwise rows are deleted in the table's ``write.delete.mode`` (copy-on-write rewrites the files,
merge-on-read writes position deletes). SQL takes no snapshot properties: Iceberg's writes and
metadata deletes add those of ``CommitMetadata`` (a thread-local its ``withCommitProperties`` sets
around a Java ``Callable``, which Python cannot pass without a callback server). The thread-local is
set for the call instead, on the JVM thread that serves this Python thread (PySpark pins them), and
cleared after it."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import Any

from pyspark.sql import SparkSession

from icelake_assets.catalog.connection import TableRef
from icelake_assets.maintenance.spark import commit_tags, fencing
from icelake_assets.maintenance.spark.procedures import table_identifier

_FIELD = "COMMIT_PROPERTIES"


def _jvm(spark: SparkSession) -> Any:
    jvm = spark._jvm  # noqa: SLF001 - PySpark's handle on the JVM
    assert jvm is not None, "a Spark session without a JVM"
    return jvm


def _thread_local(spark: SparkSession) -> Any:
    jvm = _jvm(spark)
    # py4j resolves the class as actions.py's SparkActions (the loader of Spark's jars); its
    # java.lang.Class is then the reflection handle (Class.forName would ask the system loader).
    cls = jvm.org.apache.iceberg.spark.CommitMetadata._java_lang_class
    field = cls.getDeclaredField(_FIELD)
    field.setAccessible(True)
    return field.get(None)


@contextlib.contextmanager
def commit_properties(spark: SparkSession, properties: Mapping[str, str]) -> Iterator[None]:
    """Iceberg commits Spark makes on this thread inside carry ``properties`` in their summary."""
    if not properties:
        yield
        return
    local = _thread_local(spark)
    jmap = _jvm(spark).java.util.HashMap()
    for key, value in properties.items():
        jmap.put(key, value)
    local.set(jmap)
    try:
        yield
    finally:
        local.remove()


def delete_where(
    spark: SparkSession, ref: TableRef, condition: str, properties: Mapping[str, str] | None = None
) -> None:
    """``DELETE FROM <table> WHERE <condition>`` (``condition`` built from quoted parts by the
    caller), fenced and tagged with the run's properties (commit_tags.py) and ``properties``."""
    with (
        fencing.committing(f"{ref} expire_data"),
        commit_properties(spark, {**commit_tags.session_properties(spark), **(properties or {})}),
    ):
        spark.sql(f"DELETE FROM {table_identifier(ref)} WHERE {condition}")
    spark.sql(f"REFRESH TABLE {table_identifier(ref)}")
