"""Spark session configuration: Iceberg runtime jar, JDBC drivers, and every configured catalog."""

from __future__ import annotations

import glob
import logging
import os
from pathlib import Path

from icelake_assets.catalog.spark_catalog import catalog_type, spark_catalog_conf
from icelake_assets.catalog.spark_storage import s3a_options, uses_s3
from icelake_assets.maintenance.spark.jars import (
    SparkSetupError,
    iceberg_runtime_jar,
    jars_dir,
)
from icelake_assets.settings import Settings, public_properties
from icelake_assets.settings.schema import is_local_master

# JDBC URL prefix -> (driver jar, Debian package, Maven coordinates); the SQLite driver also needs its JNI
# library. Every present driver goes on spark.jars (the driver JVM and, shipped by Spark, executors):
# a live session cannot add a jar later, when a catalog of the other kind is registered at runtime.
_DRIVERS = {
    "jdbc:sqlite:": (
        "/usr/share/java/sqlite-jdbc.jar",
        "libxerial-sqlite-jdbc-java",
        "org.xerial:sqlite-jdbc",
    ),
    "jdbc:postgresql:": (
        "/usr/share/java/postgresql.jar",
        "libpostgresql-jdbc-java",
        "org.postgresql:postgresql",
    ),
}
_JNI_DIRS = "/usr/lib/*-linux-gnu/jni"
# Hadoop's S3A connector and the AWS SDK it was built against (scripts/bootstrap.sh extracts them from
# PyPI's sagemaker-pyspark sdist: Maven is not always reachable). pyspark 3.5 ships Hadoop 3.3.4.
S3A_JARS = ("hadoop-aws-*.jar", "aws-java-sdk-bundle-*.jar")
_log = logging.getLogger(__name__)
# A user's jar or package that already brings S3A, or Iceberg's own S3 client (S3FileIO).
_S3A_PROVIDED = ("hadoop-aws", "hadoop-cloud-storage")
_S3_FILE_IO_PROVIDED = ("iceberg-aws-bundle",)


# The driver's own addresses. Unset, Spark binds its RPC and block manager ports to the host's routable
# address (even when the host name resolves to loopback), unauthenticated; a local master's executors live
# in the driver's JVM, so loopback is all it needs.
LOOPBACK = "127.0.0.1"
DRIVER_ADDRESS_KEYS = ("spark.driver.host", "spark.driver.bindAddress")
# Spark's shared secret (settings spark.auth_secret): never in resource config, Spark redacts it in its UI
# and logs, and a standalone worker hands it to its executors in their environment, not their command line.
AUTH_SECRET_KEY = "spark.authenticate.secret"


# Spark options that hold lists: a user's value is appended to the product's, never replaces it.
LIST_OPTIONS = {
    "spark.jars": ",",
    "spark.jars.packages": ",",
    "spark.driver.extraClassPath": ":",
    "spark.executor.extraClassPath": ":",
    "spark.driver.extraJavaOptions": " ",
    "spark.executor.extraJavaOptions": " ",
}


def s3a_jars() -> list[str]:
    """The S3A jars installed by bootstrap (empty when either is missing: then Spark has no S3, and the
    pre-flight says so before a run commits anything)."""
    found = [sorted(glob.glob(str(jars_dir() / pattern))) for pattern in S3A_JARS]
    return [matches[-1] for matches in found] if all(found) else []


def _provides(names: tuple[str, ...], *lists: str | tuple[str, ...]) -> bool:
    items = [i for entry in lists for i in (entry.split(",") if isinstance(entry, str) else entry)]
    return any(name in Path(i.strip()).name or name in i for i in items for name in names)


def _shared_hadoop_options(s3_catalogs: dict[str, dict]) -> dict[str, str]:
    """``spark.hadoop.*`` S3A options every S3 catalog agrees on: the session-wide Hadoop configuration
    is what Spark lists and deletes orphans with. Options the catalogs disagree on stay per catalog
    (``spark.sql.catalog.<name>.hadoop.*``, what each catalog's FileIO reads)."""
    merged: dict[str, str] = {}
    conflicting: set[str] = set()
    for props in s3_catalogs.values():
        for key, value in s3a_options(props, os.environ).items():
            if key in merged and merged[key] != value:
                conflicting.add(key)
            merged.setdefault(key, value)
    return {f"spark.hadoop.{k}": v for k, v in merged.items() if k not in conflicting}


def _check_drivers(catalogs: dict[str, dict[str, str]], packages: tuple[str, ...]) -> None:
    """A JDBC catalog whose driver is neither installed nor among spark.packages fails at its first
    query with "No suitable driver": say so up front, with what to install."""
    for name, conf in catalogs.items():
        uri = conf.get(f"spark.sql.catalog.{name}.uri", "")
        for prefix, (jar, debian, maven) in _DRIVERS.items():
            if (
                uri.startswith(prefix)
                and not os.path.exists(jar)
                and not any(p.startswith(maven) for p in packages)
            ):
                raise SparkSetupError(
                    f"catalog {name!r} ({prefix[5:-1]}) needs the JDBC driver {jar}: "
                    f"install the Debian package {debian}, or add {maven}:<version> to "
                    "spark.packages"
                )


def _check_master(master: str, config: dict[str, str]) -> None:
    """The Dagster run process is the Spark driver (ops call Spark SQL on its session): refuse what
    would put the driver elsewhere, with the reason, instead of Spark's own error at the first op."""
    if master.startswith("sc://"):
        raise SparkSetupError(
            f"spark.master {master!r}: Spark Connect is not supported (maintenance "
            "registers catalogs and ships jars on a classic session); use the cluster's "
            "own master URL"
        )
    if config.get("spark.submit.deployMode", "client") != "client":
        raise SparkSetupError(
            "spark.config spark.submit.deployMode must be 'client': the Dagster run "
            "process is the Spark driver"
        )


def _scan_reporting(
    settings: Settings, catalogs: dict[str, dict[str, str]]
) -> tuple[str | None, dict[str, str]]:
    """The scan reporter's jar and, with ``scan_reports.dir`` set, each catalog's reporter properties
    (docs/layout.md). The jar goes on every session once built, reporting on or off: Iceberg loads the
    reporter with its own class loader, so a live session (the tests' shared one, the resident driver)
    cannot report for a catalog registered later unless the jar was there from the start. A catalog
    whose reporter the user set in spark.config keeps it (Iceberg takes one per catalog)."""
    from icelake_assets.maintenance.spark import reporter_jar as reporter

    uri = settings.scan_reports.uri
    if uri is None:
        return reporter.built_reporter_jar(), {}
    jar = reporter.require_reporter_jar()
    out: dict[str, str] = {}
    for name in catalogs:
        key = f"spark.sql.catalog.{name}.metrics-reporter-impl"
        theirs = settings.spark.config.get(key)
        if theirs and theirs != reporter.REPORTER_CLASS:
            _log.warning(f"catalog {name!r}: spark.config sets {key}={theirs}: its scans are not collected")
            continue
        out[key] = reporter.REPORTER_CLASS
        out[f"spark.sql.catalog.{name}.{reporter.DIR_PROPERTY}"] = uri
    return jar, out


def spark_config(
    settings: Settings, app_name: str = "icelake_assets", include_secrets: bool = True
) -> dict[str, str]:
    """The full Spark configuration for maintenance, derived from the settings' catalogs.

    ``include_secrets=False`` keeps only what is known to be safe to show (see
    :func:`~icelake_assets.settings.is_safe_key`; URIs without password or query): for Dagster resource
    config, which the UI and the run storage keep; the resource adds the rest at runtime."""
    conf: dict[str, str] = {
        "spark.master": settings.spark.master,
        "spark.app.name": app_name,
        "spark.sql.extensions": "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions",
        "spark.ui.showConsoleProgress": "false",
        "spark.ui.enabled": "false",
        "spark.sql.shuffle.partitions": "4",
        "spark.driver.memory": "2g",
        "spark.sql.session.timeZone": "UTC",
    }
    if settings.automation.table_concurrency > 1:
        # Tables of a run maintained at once each submit to a pool of their own
        # (orchestration/assets/table_concurrency.py): FAIR shares the driver's cores between them
        # (a static conf: set when the driver starts). At 1, Spark's default FIFO, as before.
        conf["spark.scheduler.mode"] = "FAIR"
    _check_master(settings.spark.master, settings.spark.config)
    # The master spark.config may set wins (below). Either address key set by the user keeps Spark's own
    # rule for the other (bindAddress defaults to host).
    master = settings.spark.config.get("spark.master", settings.spark.master)
    if is_local_master(master) and not any(k in settings.spark.config for k in DRIVER_ADDRESS_KEYS):
        conf.update(dict.fromkeys(DRIVER_ADDRESS_KEYS, LOOPBACK))
    # A cluster's driver, master and executors authenticate each other (the settings refuse a cluster
    # master without a secret unless spark.authenticate is false): the flag is shown, the secret is not.
    if settings.spark.authenticate and not is_local_master(master):
        conf["spark.authenticate"] = "true"
    jars = [jar for jar, _, _ in _DRIVERS.values() if os.path.exists(jar)]
    user_jars = settings.spark.config.get("spark.jars", "")
    s3_file_io = _provides(_S3_FILE_IO_PROVIDED, settings.spark.packages, user_jars)
    catalogs = {
        name: spark_catalog_conf(name, props, s3_file_io=s3_file_io)
        for name, props in settings.catalogs.items()
    }
    s3_catalogs = {
        name: props for name, props in settings.catalogs.items() if uses_s3(catalog_type(name, props), props)
    }
    if s3_catalogs and not _provides(_S3A_PROVIDED, settings.spark.packages, user_jars):
        jars += s3a_jars()
    _check_drivers(catalogs, settings.spark.packages)
    if settings.spark.packages:
        conf["spark.jars.packages"] = ",".join(settings.spark.packages)
    else:
        jars.insert(0, iceberg_runtime_jar())
    reporter_jar, reporting = _scan_reporting(settings, catalogs)
    if reporter_jar:
        jars.append(reporter_jar)
    if jars:
        conf["spark.jars"] = ",".join(jars)
    jni = glob.glob(_JNI_DIRS)
    if jni:
        conf["spark.driver.extraJavaOptions"] = "-Djava.library.path=" + ":".join(jni)
        conf["spark.executor.extraJavaOptions"] = "-Djava.library.path=" + ":".join(jni)
    # What comes from the settings (catalog properties, spark.config) may carry secrets; the above is ours.
    derived: dict[str, str] = _shared_hadoop_options(s3_catalogs) if s3_catalogs else {}
    if "spark.authenticate" in conf and settings.spark.auth_secret:
        derived[AUTH_SECRET_KEY] = settings.spark.auth_secret  # from the environment, added at runtime
    for catalog_conf in catalogs.values():
        derived.update(catalog_conf)
    derived.update(reporting)
    derived.update(settings.spark.config)
    # A user's jars, packages, class path or JVM options add to ours: replacing them would drop the
    # Iceberg runtime (Spark then fails at the first CALL with PARSE_SYNTAX_ERROR).
    for key, sep in LIST_OPTIONS.items():
        if key in conf and key in derived:
            ours = [v for v in conf[key].split(sep) if v]
            derived[key] = sep.join(dict.fromkeys([*ours, *(v for v in derived[key].split(sep) if v)]))
    if include_secrets:
        return {**conf, **derived}
    return {**{k: v for k, v in conf.items() if k not in derived}, **public_properties(derived)}


def secret_spark_config(settings: Settings) -> dict[str, str]:
    """What ``spark_config(include_secrets=False)`` leaves out, read from the environment-backed settings."""
    public = spark_config(settings, include_secrets=False)
    return {k: v for k, v in spark_config(settings).items() if k not in public}
