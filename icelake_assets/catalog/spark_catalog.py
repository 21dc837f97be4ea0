"""Spark catalog properties derived from the same pyiceberg properties: one config, two engines."""

from __future__ import annotations

import os
from collections.abc import Mapping
from urllib.parse import unquote, urlsplit

from icelake_assets.catalog.spark_storage import HADOOP_FILE_IO, s3a_options, uses_s3
from icelake_assets.settings import SettingsError

SPARK_CATALOG = "org.apache.iceberg.spark.SparkCatalog"
# pyiceberg property names that Iceberg Java's FileIO understands under the same name.
_PASSTHROUGH_PREFIXES = ("s3.", "client.", "gcs.", "adls.", "io-impl", "warehouse")


def _jdbc_from_sqlalchemy(uri: str) -> tuple[str, dict[str, str]]:
    """Map a SQLAlchemy URL (pyiceberg's SQL catalog) to a JDBC URL plus user/password properties."""
    if uri.startswith("sqlite:///"):
        # SQLite allows one writer: one pooled connection per JVM, and wait for a lock rather than fail.
        path = uri[len("sqlite:///") :].split("?")[0]
        # pyiceberg creates the catalog tables; Iceberg's own check for them leaves a read open on
        # SQLite (a SHARED lock held for the JVM's life) that blocks every writer outside the JVM.
        return "jdbc:sqlite:" + path, {
            "clients": "1",
            "jdbc.busy_timeout": "60000",
            "jdbc.init-catalog-tables": "false",
        }
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
    raise SettingsError(
        f"SQL catalog uri {uri.split('@')[-1]!r}: only sqlite and postgresql are mapped to JDBC"
    )


# pyiceberg infers the type from the uri when `type` is absent (pyiceberg.catalog.infer_catalog_type).
_TYPE_BY_SCHEME = {"http": "rest", "https": "rest", "thrift": "hive"}
# REST: pyiceberg names that Iceberg's RESTCatalog / OAuth2 / SigV4 read under the same name.
_REST_KEYS = (
    "credential",
    "token",
    "oauth2-server-uri",
    "scope",
    "audience",
    "resource",
    "snapshot-loading-mode",
    "rest-page-size",
)
# Glue: names Iceberg's GlueCatalog reads under the same name (pyiceberg's glue.* credentials,
# profile and retry settings have no Java counterpart: Spark uses the AWS default credential chain).
_GLUE_KEYS = (
    "glue.id",
    "glue.endpoint",
    "glue.skip-archive",
    "glue.account-id",
    "glue.skip-name-validation",
    "glue.lakeformation-enabled",
)
# pyiceberg's client.* AWS credentials are a fallback for s3.*; Iceberg's S3FileIO reads only s3.*.
_CLIENT_FALLBACKS = {
    "client.access-key-id": "s3.access-key-id",
    "client.secret-access-key": "s3.secret-access-key",
    "client.session-token": "s3.session-token",
}


def catalog_type(name: str, props: dict[str, str]) -> str:
    """The catalog's type as pyiceberg resolves it: ``type``, else inferred from the uri's scheme."""
    if "type" in props:
        return props["type"]
    if not props.get("uri"):
        raise SettingsError(
            f"catalog {name!r}: set `type` (sql, rest, hive, glue) or a `uri` to infer it from"
        )
    scheme = urlsplit(props.get("uri", "")).scheme.split("+")[0]
    if scheme in _TYPE_BY_SCHEME:
        return _TYPE_BY_SCHEME[scheme]
    if scheme in ("sqlite", "postgresql", "postgres"):
        return "sql"
    raise SettingsError(
        f"catalog {name!r}: set `type` (sql, rest, hive, glue): it cannot be inferred from "
        f"uri scheme {scheme!r}"
    )


def _require_uri(name: str, kind: str, props: dict[str, str]) -> str:
    if not props.get("uri"):
        raise SettingsError(f"catalog {name!r}: type {kind!r} needs `uri`")
    return props["uri"]


def _aws_region(props: dict[str, str], *specific: str) -> dict[str, str]:
    """Iceberg's AWS clients take one region, ``client.region``; pyiceberg also reads per-service keys."""
    for key in ("client.region", *specific):
        if props.get(key):
            return {"client.region": props[key]}
    return {}


def _rest_auth(name: str, auth: object) -> dict[str, str]:
    """pyiceberg's nested ``auth`` property as Iceberg Java's REST client reads it: ``noop`` is no
    authentication, ``basic`` and ``oauth2`` (client credentials) have Java counterparts; the others
    (google, custom, legacy) are refused with the reason instead of failing at Spark's first call."""
    if auth is None:
        return {}
    if not isinstance(auth, dict) or not isinstance(auth.get("type"), str):
        raise SettingsError(f"catalog {name!r}: `auth` must be a mapping with a `type` (noop, basic, oauth2)")
    kind = auth["type"]
    nested = auth.get(kind)
    options: dict = nested if isinstance(nested, dict) else {}
    if kind == "noop":
        return {"rest.auth.type": "none"}
    if kind == "basic":
        return {
            "rest.auth.type": "basic",
            "rest.auth.basic.username": str(options.get("username", "")),
            "rest.auth.basic.password": str(options.get("password", "")),
        }
    if kind == "oauth2":
        out = {
            "rest.auth.type": "oauth2",
            "credential": f"{options.get('client_id', '')}:{options.get('client_secret', '')}",
        }
        if options.get("token_url"):
            out["oauth2-server-uri"] = str(options["token_url"])
        if options.get("scope"):
            out["scope"] = str(options["scope"])
        return out
    raise SettingsError(
        f"catalog {name!r}: auth type {kind!r} has no counterpart in Iceberg's Java REST client (noop, "
        "basic and oauth2 do): configure Spark's catalog options under spark.config instead"
    )


def spark_catalog_conf(
    name: str,
    props: dict[str, str],
    s3_file_io: bool = False,
    environ: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """``spark.sql.catalog.<name>.*`` entries for an Iceberg SparkCatalog over the same catalog.

    Property names differ between pyiceberg and Iceberg Java: docs/scaling.md ("Growing beyond one
    machine") lists what each type maps; unknown names are not forwarded (Java would ignore them).
    A catalog on S3 reads it through Hadoop's S3A (``HadoopFileIO``, options from the same ``s3.*``
    properties under the catalog's ``hadoop.*``) unless ``s3_file_io``: iceberg-aws-bundle is on
    Spark's class path, or the catalog names its ``io-impl``. ``environ``: where S3A credentials come
    from when the properties have none (default: this process's environment)."""
    kind = catalog_type(name, props)
    prefix = f"spark.sql.catalog.{name}"
    # Writers outside this JVM (pyiceberg, other engines) commit all the time: a cached table would
    # hide their snapshots from validation ("Cannot find snapshot") and stale procedures.
    out: dict[str, str] = {"cache-enabled": "false"}
    if kind == "sql":
        jdbc, extra = _jdbc_from_sqlalchemy(_require_uri(name, kind, props))
        out.update({"type": "jdbc", "uri": jdbc, **extra})
    elif kind == "rest":
        out.update({"type": "rest", "uri": _require_uri(name, kind, props)})
        out.update({k: props[k] for k in _REST_KEYS if k in props})
        out.update(_rest_auth(name, props.get("auth")))
        if str(props.get("rest.sigv4-enabled", "")).lower() == "true":
            # Iceberg 1.10 deprecates rest.sigv4-enabled for rest.auth.type=sigv4.
            out["rest.auth.type"] = "sigv4"
            out.update(_aws_region(props, "rest.signing-region"))
        out.update(
            {
                k: v
                for k, v in props.items()
                if k.startswith(("header.", "rest.")) and k != "rest.sigv4-enabled"
            }
        )
    elif kind == "hive":
        out.update({"type": "hive", "uri": _require_uri(name, kind, props)})
        if props.get("hive.kerberos-authentication", "").lower() == "true":
            # Iceberg's HiveCatalog reads the metastore client's Hadoop settings (per catalog:
            # spark.sql.catalog.<name>.hadoop.*); the principal comes from hive-site.xml.
            out["hadoop.hive.metastore.sasl.enabled"] = "true"
    elif kind == "glue":
        out["catalog-impl"] = "org.apache.iceberg.aws.glue.GlueCatalog"
        out["io-impl"] = "org.apache.iceberg.aws.s3.S3FileIO"
        out.update({k: props[k] for k in _GLUE_KEYS if k in props})
        out.update(_aws_region(props, "glue.region", "s3.region"))
    else:
        raise SettingsError(f"catalog {name!r}: type {kind!r} has no Spark mapping (sql, rest, hive, glue)")
    for key, value in props.items():
        if key.startswith(_PASSTHROUGH_PREFIXES) and key not in _CLIENT_FALLBACKS:
            out.setdefault(key, value)
    for key, target in _CLIENT_FALLBACKS.items():
        if key in props and target not in props:
            out[target] = props[key]
    if uses_s3(kind, props) and kind != "glue":
        if not s3_file_io and "io-impl" not in props:
            # Iceberg's default for s3:// is S3FileIO, whose AWS SDK v2 only iceberg-aws-bundle ships.
            out["io-impl"] = HADOOP_FILE_IO
        hadoop = s3a_options(props, os.environ if environ is None else environ)
        out.update({f"hadoop.{k}": v for k, v in hadoop.items()})
    return {prefix: SPARK_CATALOG, **{f"{prefix}.{k}": v for k, v in out.items()}}
