"""Spark's access to a catalog's object storage, derived from the same pyiceberg properties (issue 20).

pyiceberg reads S3 with its own client (``s3.endpoint``, ``s3.access-key-id``...). Iceberg Java's own
S3 client (``S3FileIO``) needs ``iceberg-aws-bundle``, which an offline machine may not have; Hadoop's
S3A connector (``hadoop-aws`` + the AWS SDK bundle) reads the same objects through ``HadoopFileIO``.
This module maps the pyiceberg properties to S3A's Hadoop options, so a user writes them once. Plain
mappings, no Spark: maintenance/spark/session.py decides on jars and puts the options in the session.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

S3A_FILESYSTEM = "org.apache.hadoop.fs.s3a.S3AFileSystem"
HADOOP_FILE_IO = "org.apache.iceberg.hadoop.HadoopFileIO"
S3_FILE_IO = "org.apache.iceberg.aws.s3.S3FileIO"
# Iceberg treats s3a:// and s3n:// as s3:// (health/orphans.py EQUAL_SCHEMES); S3A serves all three.
S3_SCHEMES = ("s3", "s3a", "s3n")
_S3_HINTS = ("s3.", "client.access-key-id", "client.secret-access-key", "client.session-token")
_TRUE = ("true", "1", "yes")
# The environment's AWS credentials (what pyiceberg's boto/pyarrow clients read too).
_ENV_CREDENTIALS = {
    "fs.s3a.access.key": "AWS_ACCESS_KEY_ID",
    "fs.s3a.secret.key": "AWS_SECRET_ACCESS_KEY",
    "fs.s3a.session.token": "AWS_SESSION_TOKEN",
}


def is_s3_location(location: str) -> bool:
    return urlsplit(location).scheme.lower() in S3_SCHEMES


def uses_s3(kind: str, props: Mapping[str, Any]) -> bool:
    """Whether the catalog's tables live on S3 by its properties: a Glue catalog, an ``s3://``
    warehouse, or S3 properties (a REST catalog naming none is left to Iceberg's defaults)."""
    if kind == "glue":
        return True
    warehouse = props.get("warehouse")
    if isinstance(warehouse, str) and is_s3_location(warehouse):
        return True
    return any(str(k).startswith(_S3_HINTS) for k in props)


def _first(props: Mapping[str, Any], *keys: str) -> str | None:
    for key in keys:
        value = props.get(key)
        if isinstance(value, str) and value:
            return value
    return None


def s3a_options(props: Mapping[str, Any], environ: Mapping[str, str]) -> dict[str, str]:
    """Hadoop options (without ``spark.hadoop.``) that make S3A read and write what pyiceberg does.

    Credentials: ``s3.*`` (pyiceberg's ``client.*`` fallbacks), else the environment's ``AWS_*`` (copied,
    so executors on other machines have them too), else S3A's default chain (instance profile...);
    ``s3.anonymous=true`` signs nothing."""
    out = {
        # s3:// locations are what Iceberg and pyiceberg write; Hadoop maps only s3a:// by default.
        "fs.s3.impl": S3A_FILESYSTEM,
        "fs.s3a.impl": S3A_FILESYSTEM,
        "fs.s3n.impl": S3A_FILESYSTEM,
        # S3A deletes the parent "directory markers" after every write by default: a bulk delete of
        # keys that mostly never existed, which stores without directory semantics (SeaweedFS, MinIO)
        # answer key by key with AccessDenied, logged as MultiObjectDeleteSupport warnings. Iceberg
        # never lists through markers: keeping them removes the requests and their warnings.
        "fs.s3a.directory.marker.retention": "keep",
    }
    endpoint = _first(props, "s3.endpoint")
    if endpoint:
        out["fs.s3a.endpoint"] = endpoint
        scheme = urlsplit(endpoint).scheme.lower()
        if scheme in ("http", "https"):
            out["fs.s3a.connection.ssl.enabled"] = str(scheme == "https").lower()
    region = _first(props, "s3.region", "client.region")
    if region:
        out["fs.s3a.endpoint.region"] = region  # Hadoop >= 3.3.2 reads it; older ones ignore it
    path_style = props.get("s3.path-style-access")
    if path_style is not None:
        out["fs.s3a.path.style.access"] = str(str(path_style).lower() in _TRUE).lower()
    elif endpoint:
        # A custom endpoint is usually a store without virtual-hosted buckets (pyiceberg's own default
        # for a custom endpoint is path style too).
        out["fs.s3a.path.style.access"] = "true"
    if str(props.get("s3.anonymous", "")).lower() in _TRUE:
        out["fs.s3a.aws.credentials.provider"] = "org.apache.hadoop.fs.s3a.AnonymousAWSCredentialsProvider"
        return out
    keys = {
        "fs.s3a.access.key": _first(props, "s3.access-key-id", "client.access-key-id"),
        "fs.s3a.secret.key": _first(props, "s3.secret-access-key", "client.secret-access-key"),
        "fs.s3a.session.token": _first(props, "s3.session-token", "client.session-token"),
    }
    if not keys["fs.s3a.access.key"]:
        keys = {k: environ.get(var) or None for k, var in _ENV_CREDENTIALS.items()}
    out.update({k: v for k, v in keys.items() if v})
    if keys["fs.s3a.session.token"] and keys["fs.s3a.access.key"]:
        out["fs.s3a.aws.credentials.provider"] = "org.apache.hadoop.fs.s3a.TemporaryAWSCredentialsProvider"
    return out
