"""Before a run's first Spark commit on a table: can Spark finish what the run plans? (issue 20)

Without it, a run could expire snapshots (a commit) and then fail at the rewrite because Spark cannot
write the table's data folder, or has no FileSystem for its scheme (``s3``/``s3a`` without the S3A
jars), leaving a half-maintained table and no validation. The checks, through the run's own Spark
session (its Hadoop configuration and class path), in this order:

* ``catalog``: the catalog answers Spark for this table (its ``snapshots`` metadata table is read);
* ``file-io``: the catalog's ``io-impl`` class (when set) loads in Spark's JVM;
* ``filesystem``: each scheme of the table's location and write paths has a Hadoop FileSystem whose
  class loads (``s3://`` needs ``fs.s3.impl`` and the S3A jars);
* ``read``: the table's metadata folder can be listed (what orphan removal and expiry do);
* ``write``: each write path can be written: a hidden probe file is created and deleted (hidden names
  are never orphans, and the probe is gone before the check returns).

Dagster-free; the caller (orchestration/resources.py, ``IcebergSparkResource.session_for``) turns a
refusal into the op's failure before the first procedure runs.
"""

from __future__ import annotations

import posixpath
import uuid
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import urlsplit

from pyiceberg.table import Table
from pyspark.sql import SparkSession

from icelake_assets.catalog.connection import TableRef
from icelake_assets.catalog.spark_storage import S3_SCHEMES
from icelake_assets.causes import root_cause
from icelake_assets.maintenance.spark.procedures import table_identifier
from icelake_assets.partitions.quoting import quote_identifier
from icelake_assets.types import IcelakeError, KnownTable

Check = Literal["catalog", "file-io", "filesystem", "read", "write"]
# What to do when S3 is unreachable for lack of classes (README "Your own lake").
_S3_REMEDY = (
    "the S3A jars (hadoop-aws, aws-java-sdk-bundle) must be on spark.jars: run scripts/bootstrap.sh "
    "(installs them into .venv/share/icelake-jars), or add org.apache.hadoop:hadoop-aws:3.3.4 to "
    "spark.packages"
)


class PreflightError(IcelakeError, RuntimeError):
    """Spark cannot finish this table's maintenance: nothing was committed."""


@dataclass(frozen=True)
class PreflightProblem:
    """One check that failed: which, on what (a catalog, a class, a scheme, a folder), and why."""

    check: Check
    target: str
    cause: str

    def __str__(self) -> str:
        what = {
            "catalog": "Spark cannot read the table through catalog",
            "file-io": "Spark cannot load the catalog's FileIO",
            "filesystem": "Spark has no usable FileSystem for",
            "read": "Spark cannot list",
            "write": "Spark cannot write",
        }[self.check]
        return f"{what} {self.target}: {self.cause}"


@dataclass(frozen=True)
class PreflightResult:
    table: str
    checked: tuple[str, ...] = ()
    problems: tuple[PreflightProblem, ...] = field(default_factory=tuple)

    @property
    def ok(self) -> bool:
        return not self.problems

    def raise_if_refused(self) -> None:
        if self.problems:
            raise PreflightError(
                f"{self.table}: pre-flight refused the run before any commit: "
                + "; ".join(str(p) for p in self.problems)
            )


def _write_paths(table: Table) -> list[str]:
    known = KnownTable(".".join(table.name()), table.metadata.location, dict(table.properties))
    return list(dict.fromkeys(known.write_paths.values()))


def _scheme(location: str) -> str:
    return urlsplit(location).scheme.lower() or "file"


def _jvm(spark: SparkSession) -> tuple[Any, Any]:
    jvm, jsc = spark.sparkContext._jvm, spark.sparkContext._jsc
    if jvm is None or jsc is None:
        raise PreflightError("Spark has no JVM to check the table with")
    return jvm, jsc.hadoopConfiguration()


def _file_io(spark: SparkSession, catalog: str) -> PreflightProblem | None:
    """The catalog's io-impl, loaded the way Iceberg loads it (Spark's class loader, with spark.jars)."""
    impl = spark.conf.get(f"spark.sql.catalog.{catalog}.io-impl", None)
    if not impl:
        return None
    jvm, _ = _jvm(spark)
    try:
        loader = jvm.org.apache.spark.util.Utils.getContextOrSparkClassLoader()
        jvm.java.lang.Class.forName(impl, True, loader)
        return None
    except Exception as err:
        return PreflightProblem("file-io", impl, str(root_cause(err)))


def _filesystem(spark: SparkSession, scheme: str) -> PreflightProblem | None:
    """Hadoop's FileSystem class for ``scheme`` (``fs.<scheme>.impl`` or its service entry) loads."""
    jvm, conf = _jvm(spark)
    try:
        jvm.org.apache.hadoop.fs.FileSystem.getFileSystemClass(scheme, conf)
        return None
    except Exception as err:
        cause = str(root_cause(err))
        if scheme in S3_SCHEMES:
            impl = conf.get(f"fs.{scheme}.impl") or "not set"
            cause += f" (fs.{scheme}.impl: {impl}); {_S3_REMEDY}"
        return PreflightProblem("filesystem", f"{scheme}://", cause)


def _list(spark: SparkSession, folder: str) -> PreflightProblem | None:
    jvm, conf = _jvm(spark)
    try:
        path = jvm.org.apache.hadoop.fs.Path(folder)
        path.getFileSystem(conf).listStatus(path)
        return None
    except Exception as err:  # py4j: the Java exception's root names the cause
        return PreflightProblem("read", folder, str(root_cause(err)))


def _probe(spark: SparkSession, folder: str) -> PreflightProblem | None:
    """None when Spark's Hadoop FileSystem can create and delete a file under ``folder``."""
    jvm, conf = _jvm(spark)
    try:
        # Hidden (never an orphan) and named like an Iceberg file: stores that admit only Iceberg's
        # file kinds under a table (S3 table buckets: SeaweedFS refuses `.name` without one) take it.
        name = f".icelake-preflight-{uuid.uuid4().hex}.avro"
        path = jvm.org.apache.hadoop.fs.Path(f"{folder.rstrip('/')}/{name}")
        fs = path.getFileSystem(conf)
        fs.create(path, True).close()
        fs.delete(path, False)
        return None
    except Exception as err:
        return PreflightProblem("write", folder, str(root_cause(err)))


def preflight(spark: SparkSession, ref: TableRef, table: Table) -> PreflightResult:
    """Whether Spark can read this table through its catalog, load its FileIO and FileSystems, list
    its metadata and write where it writes. Nothing is committed; every failed check is reported."""
    checked: list[str] = []
    problems: list[PreflightProblem] = []
    try:
        snapshots = f"{table_identifier(ref)}.{quote_identifier('snapshots')}"
        spark.sql(f"SELECT snapshot_id FROM {snapshots} LIMIT 1").collect()
    except Exception as err:
        problems.append(PreflightProblem("catalog", repr(ref.catalog), str(root_cause(err))))
    checked.append("catalog")
    if (problem := _file_io(spark, ref.catalog)) is not None:
        problems.append(problem)
    checked.append("file-io")
    writes = _write_paths(table)
    metadata_folder = posixpath.dirname(table.metadata_location)
    usable: set[str] = set()
    for scheme in dict.fromkeys(_scheme(p) for p in [metadata_folder, *writes]):
        checked.append(f"{scheme}://")
        if (problem := _filesystem(spark, scheme)) is not None:
            problems.append(problem)  # its folders cannot be probed: one cause, said once
        else:
            usable.add(scheme)
    if _scheme(metadata_folder) in usable:
        checked.append(metadata_folder)
        if (problem := _list(spark, metadata_folder)) is not None:
            problems.append(problem)
    for folder in writes:
        if _scheme(folder) in usable:
            checked.append(folder)
            if (problem := _probe(spark, folder)) is not None:
                problems.append(problem)
    return PreflightResult(str(ref), tuple(checked), tuple(problems))
