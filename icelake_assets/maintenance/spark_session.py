"""Spark session configuration: Iceberg runtime jar, JDBC drivers, and every configured catalog."""

from __future__ import annotations

import glob
import os
from pathlib import Path

from icelake_assets.catalog.spark_catalog import spark_catalog_conf
from icelake_assets.settings import Settings, public_properties
from icelake_assets.types import IcelakeError

ICEBERG_RUNTIME_JAR = "iceberg-spark-runtime-3.5_2.12-*.jar"
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


# Spark options that hold lists: a user's value is appended to the product's, never replaces it.
LIST_OPTIONS = {
    "spark.jars": ",",
    "spark.jars.packages": ",",
    "spark.driver.extraClassPath": ":",
    "spark.executor.extraClassPath": ":",
    "spark.driver.extraJavaOptions": " ",
    "spark.executor.extraJavaOptions": " ",
}


class SparkSetupError(IcelakeError, RuntimeError):
    """Spark cannot be configured on this machine (a jar or driver is missing)."""


def iceberg_runtime_jar() -> str:
    """The Iceberg Spark runtime jar shipped by the snowpark-connect-deps-iceberg wheel."""
    try:
        import snowpark_connect_deps_iceberg as pkg
    except ImportError as err:
        raise SparkSetupError(
            "the Iceberg Spark runtime is missing: install snowpark-connect-deps-iceberg==1.0.2 "
            "or set spark.packages in the settings"
        ) from err
    roots = [Path(p) for p in getattr(pkg, "__path__", [])]
    jars = sorted(
        j for root in roots for j in glob.glob(str(root / "**" / ICEBERG_RUNTIME_JAR), recursive=True)
    )
    if not jars:
        raise SparkSetupError(f"no {ICEBERG_RUNTIME_JAR} inside {roots}")
    return jars[-1]


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
    _check_master(settings.spark.master, settings.spark.config)
    jars = [jar for jar, _, _ in _DRIVERS.values() if os.path.exists(jar)]
    catalogs = {name: spark_catalog_conf(name, props) for name, props in settings.catalogs.items()}
    _check_drivers(catalogs, settings.spark.packages)
    if settings.spark.packages:
        conf["spark.jars.packages"] = ",".join(settings.spark.packages)
    else:
        jars.insert(0, iceberg_runtime_jar())
    if jars:
        conf["spark.jars"] = ",".join(jars)
    jni = glob.glob(_JNI_DIRS)
    if jni:
        conf["spark.driver.extraJavaOptions"] = "-Djava.library.path=" + ":".join(jni)
        conf["spark.executor.extraJavaOptions"] = "-Djava.library.path=" + ":".join(jni)
    # What comes from the settings (catalog properties, spark.config) may carry secrets; the above is ours.
    derived: dict[str, str] = {}
    for catalog_conf in catalogs.values():
        derived.update(catalog_conf)
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
