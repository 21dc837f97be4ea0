"""Spark session configuration: Iceberg runtime jar, JDBC drivers, and every configured catalog."""

from __future__ import annotations

import glob
import os
from pathlib import Path

from icelake_assets.catalog.spark_catalog import spark_catalog_conf
from icelake_assets.settings import Settings, public_properties

ICEBERG_RUNTIME_JAR = "iceberg-spark-runtime-3.5_2.12-*.jar"
# Debian's libxerial-sqlite-jdbc-java / libpostgresql-jdbc-java; the SQLite driver needs its JNI library.
_DRIVER_JARS = ("/usr/share/java/sqlite-jdbc.jar", "/usr/share/java/postgresql.jar")
_JNI_DIRS = "/usr/lib/*-linux-gnu/jni"


class SparkSetupError(RuntimeError):
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
    jars = sorted(j for root in roots for j in glob.glob(str(root / "**" / ICEBERG_RUNTIME_JAR), recursive=True))
    if not jars:
        raise SparkSetupError(f"no {ICEBERG_RUNTIME_JAR} inside {roots}")
    return jars[-1]


def spark_config(settings: Settings, app_name: str = "icelake_assets", include_secrets: bool = True) -> dict[str, str]:
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
    jars = [j for j in _DRIVER_JARS if os.path.exists(j)]
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
    for name, props in settings.catalogs.items():
        derived.update(spark_catalog_conf(name, props))
    derived.update(settings.spark.config)
    if include_secrets:
        return {**conf, **derived}
    return {**{k: v for k, v in conf.items() if k not in derived}, **public_properties(derived)}


def secret_spark_config(settings: Settings) -> dict[str, str]:
    """What ``spark_config(include_secrets=False)`` leaves out, read from the environment-backed settings."""
    public = spark_config(settings, include_secrets=False)
    return {k: v for k, v in spark_config(settings).items() if k not in public}
