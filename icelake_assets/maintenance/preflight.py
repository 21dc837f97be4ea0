"""Before a run's first Spark commit on a table: can Spark finish what the run plans? (issue 20)

Without it, a run could expire snapshots (a commit) and then fail at the rewrite because Spark cannot
write the table's data folder, or has no FileSystem for its scheme (``s3``/``s3a`` without the S3A
jars), leaving a half-maintained table and no validation. The checks, through the run's own Spark
session (its Hadoop configuration and classpath):

* the catalog answers Spark for this table (its ``snapshots`` metadata table is read);
* the table's location and write paths resolve to a Hadoop FileSystem (the scheme is supported);
* each of them can be written: a hidden probe file is created and deleted (hidden names are never
  orphans, and the probe is gone before the check returns).

Dagster-free; the caller turns a refusal into the op's failure.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from pyiceberg.table import Table
from pyspark.sql import SparkSession

from icelake_assets.catalog.connection import TableRef
from icelake_assets.causes import root_cause
from icelake_assets.maintenance.procedures import quote_identifier, table_identifier
from icelake_assets.types import IcelakeError, KnownTable


class PreflightError(IcelakeError, RuntimeError):
    """Spark cannot finish this table's maintenance: nothing was committed."""


@dataclass(frozen=True)
class PreflightResult:
    table: str
    checked: tuple[str, ...] = ()
    problems: tuple[str, ...] = field(default_factory=tuple)

    @property
    def ok(self) -> bool:
        return not self.problems

    def raise_if_refused(self) -> None:
        if self.problems:
            raise PreflightError(
                f"{self.table}: pre-flight refused the run before any commit: " + "; ".join(self.problems)
            )


def _write_paths(table: Table) -> list[str]:
    known = KnownTable(".".join(table.name()), table.metadata.location, dict(table.properties))
    return list(dict.fromkeys(known.write_paths.values()))


def _probe(spark: SparkSession, folder: str) -> str | None:
    """None when Spark's Hadoop FileSystem can create and delete a file under ``folder``."""
    jvm, jsc = spark.sparkContext._jvm, spark.sparkContext._jsc
    if jvm is None or jsc is None:
        return f"Spark has no JVM to write {folder} with"
    conf = jsc.hadoopConfiguration()
    try:
        path = jvm.org.apache.hadoop.fs.Path(f"{folder.rstrip('/')}/.icelake-preflight-{uuid.uuid4().hex}")
        fs = path.getFileSystem(conf)
        fs.create(path, True).close()
        fs.delete(path, False)
        return None
    except Exception as err:  # py4j: the Java exception's root names the cause
        return f"Spark cannot write {folder}: {root_cause(err)}"


def preflight(spark: SparkSession, ref: TableRef, table: Table) -> PreflightResult:
    """Whether Spark can read this table through its catalog and write where it writes."""
    checked, problems = [], []
    try:
        snapshots = f"{table_identifier(ref)}.{quote_identifier('snapshots')}"
        spark.sql(f"SELECT snapshot_id FROM {snapshots} LIMIT 1").collect()
        checked.append("catalog")
    except Exception as err:
        problems.append(f"Spark cannot read the table through catalog {ref.catalog!r}: {root_cause(err)}")
    for folder in _write_paths(table):
        checked.append(folder)
        if (problem := _probe(spark, folder)) is not None:
            problems.append(problem)
    return PreflightResult(str(ref), tuple(checked), tuple(problems))
