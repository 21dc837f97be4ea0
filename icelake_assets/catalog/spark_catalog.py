"""Spark catalog properties derived from the same pyiceberg properties: one config, two engines."""

from __future__ import annotations

from urllib.parse import unquote, urlsplit

from icelake_assets.settings import SettingsError

SPARK_CATALOG = "org.apache.iceberg.spark.SparkCatalog"
# pyiceberg property names that Iceberg Java's FileIO understands under the same name.
_PASSTHROUGH_PREFIXES = ("s3.", "client.", "gcs.", "adls.", "io-impl", "warehouse", "header.", "rest.")


def _jdbc_from_sqlalchemy(uri: str) -> tuple[str, dict[str, str]]:
    """Map a SQLAlchemy URL (pyiceberg's SQL catalog) to a JDBC URL plus user/password properties."""
    if uri.startswith("sqlite:///"):
        # SQLite allows one writer: one pooled connection per JVM, and wait for a lock rather than fail.
        path = uri[len("sqlite:///"):].split("?")[0]
        # pyiceberg creates the catalog tables; Iceberg's own check for them leaves a read open on
        # SQLite (a SHARED lock held for the JVM's life) that blocks every writer outside the JVM.
        return "jdbc:sqlite:" + path, {"clients": "1", "jdbc.busy_timeout": "60000",
                                        "jdbc.init-catalog-tables": "false"}
    parts = urlsplit(uri)
    dialect = parts.scheme.split("+")[0]
    if dialect in ("postgresql", "postgres"):
        host = parts.hostname or "localhost"
        port = f":{parts.port}" if parts.port else ""
        extra = {}
        if parts.username:
            extra["jdbc.user"] = unquote(parts.username)
        if parts.password:
            extra["jdbc.password"] = unquote(parts.password)
        query = f"?{parts.query}" if parts.query else ""
        return f"jdbc:postgresql://{host}{port}{parts.path}{query}", extra
    raise SettingsError(f"SQL catalog uri {uri.split('@')[-1]!r}: only sqlite and postgresql are mapped to JDBC")


def spark_catalog_conf(name: str, props: dict[str, str]) -> dict[str, str]:
    """``spark.sql.catalog.<name>.*`` entries for an Iceberg SparkCatalog over the same catalog."""
    kind = props.get("type", "rest" if props.get("uri", "").startswith("http") else "sql")
    prefix = f"spark.sql.catalog.{name}"
    # Writers outside this JVM (pyiceberg, other engines) commit all the time: a cached table would
    # hide their snapshots from validation ("Cannot find snapshot") and stale procedures.
    conf = {prefix: SPARK_CATALOG, f"{prefix}.cache-enabled": "false"}
    if kind == "sql":
        jdbc, extra = _jdbc_from_sqlalchemy(props["uri"])
        conf[f"{prefix}.type"] = "jdbc"
        conf[f"{prefix}.uri"] = jdbc
        for k, v in extra.items():
            conf[f"{prefix}.{k}"] = v
    elif kind == "rest":
        conf[f"{prefix}.type"] = "rest"
        conf[f"{prefix}.uri"] = props["uri"]
        for key in ("credential", "token", "oauth2-server-uri", "scope"):
            if key in props:
                conf[f"{prefix}.{key}"] = props[key]
    elif kind == "hive":
        conf[f"{prefix}.type"] = "hive"
        conf[f"{prefix}.uri"] = props["uri"]
    elif kind == "glue":
        conf[f"{prefix}.catalog-impl"] = "org.apache.iceberg.aws.glue.GlueCatalog"
        conf[f"{prefix}.io-impl"] = "org.apache.iceberg.aws.s3.S3FileIO"
    else:
        raise SettingsError(f"catalog {name!r}: type {kind!r} has no Spark mapping (sql, rest, hive, glue)")
    for key, value in props.items():
        if key.startswith(_PASSTHROUGH_PREFIXES):
            conf[f"{prefix}.{key}"] = value
    return conf
