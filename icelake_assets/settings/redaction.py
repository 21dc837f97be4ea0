"""What in the settings is a secret, and the settings' printable forms.

Unknown means secret: a value is shown only when its key is known to configure without authenticating
(:func:`is_safe_key`), URIs then lose their password and query values; any other value prints as ***.
A literal secret in the settings file is refused (:func:`literal_secrets` finds them; the loader raises):
secrets come from the environment, written ``${ENV_VAR}``. Free text that leaves the product (an error's
message: causes.py) goes through :func:`redact_message`. Plain string logic: imports nothing from the
package, so any layer may redact.
"""

from __future__ import annotations

import base64
import os
import re
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import quote, quote_plus, urlsplit, urlunsplit

# Printing and Dagster resource config go by what is known to be safe: a property's value is shown only
# when its key is listed here (URI values then lose their password and query values); any other value
# is a secret (***). pyiceberg / Iceberg / Spark keys that configure but never authenticate.
_SAFE_KEYS = frozenset(
    k.lower()
    for k in (
        "type",
        "uri",
        "warehouse",
        # OAuth2 endpoints of a REST catalog (pyiceberg's auth.oauth2.token_url, Iceberg Java's name)
        "token_url",
        # pyiceberg's nested ssl: {cabundle: <file>, client: {cert: <file>, key: <file>}}: paths of
        # public certificates (the private key's path stays under `key`, a secret-looking name)
        "cabundle",
        "cert",
        "oauth2-server-uri",
        "py-io-impl",
        "io-impl",
        "catalog-impl",
        "init-catalog-tables",
        "echo",
        "pool_pre_ping",
        "prefix",
        "scope",
        "audience",
        "resource",
        "cache-enabled",
        "clients",
        "jdbc.busy_timeout",
        "jdbc.init-catalog-tables",
        "downcast-ns-timestamp-to-us-on-write",
        "legacy-current-snapshot-id",
        "header.X-Iceberg-Access-Delegation",
        "rest.sigv4-enabled",
        "rest.signing-region",
        "rest.signing-name",
        "s3.path-style-access",
        "s3.force-virtual-addressing",
        "s3.role-arn",
        "s3.role-session-name",
        "s3.signer",
        "s3.signer.uri",
        "s3.proxy-uri",
        "s3.anonymous",
        "s3.sse.type",
        "s3.acl",
        "adls.account-name",
        "adls.account-host",
        "gcs.project-id",
        "gcs.access",
        "gcs.default-bucket-location",
        "gcs.requester-pays",
        "gcs.version-aware",
        "gcs.consistency",
        "hdfs.host",
        "hdfs.port",
        "hdfs.user",
        "hive.hive2-compatible",
        "hive.kerberos-authentication",
        "glue.id",
        "glue.skip-archive",
        "glue.profile-name",
        "spark.master",
        "spark.app.name",
        "spark.sql.extensions",
        "spark.sql.shuffle.partitions",
        "spark.driver.memory",
        "spark.driver.cores",
        "spark.executor.memory",
        "spark.executor.cores",
        "spark.executor.instances",
        "spark.default.parallelism",
        "spark.jars",
        "spark.jars.packages",
        "spark.sql.session.timeZone",
        # Hadoop's S3A options the product derives from s3.* (catalog/spark_storage.py); a class name,
        # not a credential, despite the word.
        "fs.s3a.path.style.access",
        "fs.s3a.directory.marker.retention",
        "fs.s3a.aws.credentials.provider",
    )
)
_SAFE_SUFFIXES = (".region", ".endpoint", "-timeout", ".impl", "-impl", "-enabled", ".enabled")
_SAFE_PREFIXES = ("spark.ui.", "spark.sql.adaptive.", "spark.dynamicallocation.")
_SPARK_CATALOG_KEY = re.compile(r"spark\.sql\.catalog\.[A-Za-z0-9_\-]+(?:\.(.+))?", re.IGNORECASE)
# Hadoop options: session-wide (spark.hadoop.<key>) or a catalog's own (spark.sql.catalog.<name>.hadoop.<key>).
_HADOOP_KEY = re.compile(r"(?:spark\.)?hadoop\.(.+)", re.IGNORECASE)
# What a secret's key looks like: a literal value under such a key is refused in the settings file.
_SECRET_MARKERS = (
    "secret",
    "password",
    "passwd",
    "token",
    "credential",
    "key-id",
    "account-key",
    "private-key",
    "access-key",
    "api-key",
    "apikey",
    "connection-string",
    "connectionstring",
    "signature",
    "authorization",
    "cookie",
)
_SECRET_WORDS = frozenset({"key", "sas", "sig", "pwd", "auth"})  # whole words of a key: fs.s3a.secret.key
# A ${VAR} or ${VAR:-default} reference to the environment (the loader interpolates them).
ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
REDACTED = "***"


def is_secret_key(key: str) -> bool:
    """Whether a key looks like it holds a secret (s3.secret-access-key, adls.connection-string,
    fs.s3a.bucket.b.secret.key, header.Authorization ...): literal values under it are refused."""
    hadoop_key = _HADOOP_KEY.fullmatch(key)
    k = (hadoop_key.group(1) if hadoop_key else key).lower()
    if k in _SAFE_KEYS:  # named safe on purpose (token_url is an endpoint, not a token)
        return False
    return any(m in k for m in _SECRET_MARKERS) or bool(_SECRET_WORDS & set(re.split(r"[.\-_]", k)))


def is_safe_key(key: str) -> bool:
    """Whether a key is known to configure without authenticating, so its value may be shown; any other
    key's value is treated as a secret (unknown means secret)."""
    catalog_key = _SPARK_CATALOG_KEY.fullmatch(key)
    if catalog_key:  # spark.sql.catalog.<name>[.<pyiceberg/Iceberg property>]
        return catalog_key.group(1) is None or is_safe_key(catalog_key.group(1))
    hadoop_key = _HADOOP_KEY.fullmatch(key)
    if hadoop_key:
        return is_safe_key(hadoop_key.group(1))
    k = key.lower()
    if is_secret_key(k):
        return False
    return k in _SAFE_KEYS or k.endswith(_SAFE_SUFFIXES) or k.startswith(_SAFE_PREFIXES)


def _uri_parts(value: str) -> tuple[str, Any] | None:
    """(prefix, urlsplit result) of a URI value (``jdbc:`` URLs too), else None."""
    prefix, rest = ("jdbc:", value[5:]) if value.lower().startswith("jdbc:") else ("", value)
    if "://" not in rest:
        return None
    try:
        parts = urlsplit(rest)
        parts.port  # noqa: B018 - raises ValueError on a malformed authority
    except ValueError:
        return None
    return prefix, parts


def _query_items(query: str) -> list[tuple[str, str | None]]:
    return [
        (item.partition("=")[0], item.partition("=")[2] if "=" in item else None)
        for item in query.split("&")
        if item
    ]


def redact_uri(value: str) -> str:
    """A URI without its password and its query and fragment values (signatures, tokens, passwords)."""
    found = _uri_parts(value)
    if found is None:
        return value
    prefix, parts = found
    if parts.password is None and not parts.query and not parts.fragment:
        return value
    netloc = parts.netloc
    if parts.password is not None:
        user, _, host = netloc.rpartition("@")
        netloc = f"{user.partition(':')[0]}:{REDACTED}@{host}"
    query = "&".join(REDACTED if v is None else f"{k}={REDACTED}" for k, v in _query_items(parts.query))
    return prefix + urlunsplit((parts.scheme, netloc, parts.path, query, REDACTED if parts.fragment else ""))


def uri_secrets(value: str) -> list[str]:
    """The secret parts of a URI value: its password, query values and fragment."""
    found = _uri_parts(value)
    if found is None:
        return []
    _, parts = found
    out = [parts.password] if parts.password else []
    out += [v if v is not None else k for k, v in _query_items(parts.query) if v or v is None]
    return out + ([parts.fragment] if parts.fragment else [])


def redact_value(key: str, value: Any) -> Any:
    """``value`` safe to print: values of keys not known to be safe become ***, URIs lose their
    password and query values; mappings and lists are redacted item by item."""
    if isinstance(value, Mapping):
        return {k: redact_value(str(k), v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(redact_value(key, v) for v in value)
    if value is None or value == "":
        return value
    if not is_safe_key(key):
        return REDACTED
    return redact_uri(value) if isinstance(value, str) else value


def redact_properties(props: Mapping[str, Any]) -> dict[str, Any]:
    return {k: redact_value(k, v) for k, v in props.items()}


def public_properties(props: Mapping[str, Any]) -> dict[str, Any]:
    """The entries that redaction leaves unchanged (safe to store in Dagster resource config)."""
    return {k: v for k, v in props.items() if redact_value(k, v) == v}


def leaf_items(props: Mapping[str, Any], path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Any]]:
    """Every (key path, value) of a catalog's properties, into pyiceberg's nested ones (``auth``,
    ``ssl``): a nested value is judged by its own key (``auth.type`` is safe, ``client_secret`` not)."""
    out: list[tuple[tuple[str, ...], Any]] = []
    for k, v in props.items():
        if isinstance(v, Mapping):
            out += leaf_items(v, (*path, str(k)))
        else:
            out.append(((*path, str(k)), v))
    return out


def literal_secrets(data: Mapping[str, Any]) -> list[tuple[Any, ...]]:
    """Key paths of the literal secrets in a settings document (before interpolation): secrets in the
    file must be ``${ENV_VAR}`` references.

    Catalog properties follow "unknown means secret": a literal is accepted only under a known-safe key.
    Spark's keys are open-ended: a literal is refused under a secret-looking key; any other unknown key
    is still printed as *** and kept out of Dagster resource config. In both, a URI's password and
    query values must be references too."""
    found: list[tuple[Any, ...]] = []
    catalogs = data.get("catalogs")
    if isinstance(catalogs, Mapping):
        for name, props in catalogs.items():
            if isinstance(props, Mapping):
                found += [
                    ("catalogs", name, *path)
                    for path, v in leaf_items(props)
                    if _is_literal_secret(str(path[-1]), v, unknown_is_secret=True)
                ]
    spark: Mapping[str, Any] = data["spark"] if isinstance(data.get("spark"), Mapping) else {}
    config: Mapping[str, Any] = spark["config"] if isinstance(spark.get("config"), Mapping) else {}
    # spark.config, and auth_secret (the cluster's spark.authenticate.secret)
    entries: list[tuple[Any, ...]] = [(("spark", "config", k), k, v) for k, v in config.items()]
    entries.append((("spark", "auth_secret"), "auth_secret", spark.get("auth_secret")))
    found += [path for path, k, v in entries if _is_literal_secret(str(k), v, unknown_is_secret=False)]
    agents = data.get("agents")
    if isinstance(agents, Mapping):  # an agent's bearer token (icelake mcp --http)
        found += [
            ("agents", name, "token")
            for name, agent in agents.items()
            if isinstance(agent, Mapping) and _is_literal_secret("token", agent.get("token"), False)
        ]
    return found


def _is_reference(text: str) -> bool:
    ref = ENV_REF.fullmatch(text.strip())
    return ref is not None and ref.group(2) is None  # a ${VAR:-default} default would be a literal


def _is_literal_secret(key: str, value: Any, unknown_is_secret: bool) -> bool:
    if value is None or value == "" or isinstance(value, bool):
        return False
    secret_key = is_secret_key(key) or (unknown_is_secret and not is_safe_key(key))
    if not isinstance(value, str):
        return secret_key  # a number under a secret key is a literal secret too
    if secret_key:
        return not _is_reference(value)
    found = _uri_parts(value)
    if found is None:
        return False
    parts = found[1]
    secrets = [parts.password] if parts.password else []
    secrets += [v for k, v in _query_items(parts.query) if v and is_secret_key(k)]
    return any(not _is_reference(part) for part in secrets)


# Free text (a driver's error) may carry a secret in any form: the loaded settings' values (the loader
# calls remember_secrets) and the environment's secret-looking variables are known; the rest by shape.
_KNOWN: set[str] = set()
_MIN_KNOWN = 6  # shorter values (true, rest, 1) would garble a message more than they hide
_MIN_ENV = 8  # the environment holds more short words under secret-looking names (AUTH_TYPE=oauth2)
_NUMBER = re.compile(r"[+-]?\d+(?:\.\d+)?")
# A URI in text, ``jdbc:`` ones too, up to a space or a quote (trailing punctuation is put back).
_TEXT_URI = re.compile(r"(?:jdbc:)?[A-Za-z][A-Za-z0-9+.\-]*://[^\s'\"<>`]+")
_TRAILING = ").,;:]}"
# user:password@ a URI parse missed (a password with a '/', a port that does not parse).
_USERINFO = re.compile(r"(?<=://)([^\s:/@'\"]*):(?!\*\*\*@)[^\s@'\"]+@")
# key=value, key: value, "key": "value", Authorization: Bearer value: the key decides (is_secret_key).
_PAIR = re.compile(
    r"(?<![\w.\-])(?P<key>[A-Za-z_][\w.\-]*)(?P<sep>[\"']?\s*(?P<op>[=:])\s*)"
    r"(?P<scheme>(?:Bearer|Basic|Token|Digest|AWS4-HMAC-SHA256)\s+)?"
    r"(?P<value>\"[^\"]*\"|'[^']*'|[^\s&,;\"'()\[\]{}<>]+)",
    re.IGNORECASE,
)
# AWS access key ids (long-term AKIA, temporary ASIA, and the other IAM unique-id prefixes).
_AWS_KEY_ID = re.compile(
    r"(?<![A-Z0-9])(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AIPA|ANPA|ANVA|AROA|APKA)[A-Z0-9]{16}(?![A-Z0-9])"
)


def settings_secrets(data: Mapping[str, Any]) -> list[str]:
    """The secret values of a settings document after interpolation (what ``${VAR}`` references
    under a secret key brought in): catalog and Spark values not known to be safe, the secret parts of
    the URIs under safe keys, agents' tokens."""
    found: list[str] = []
    pairs: list[tuple[str, Any]] = []
    catalogs = data.get("catalogs")
    if isinstance(catalogs, Mapping):
        for props in catalogs.values():
            if isinstance(props, Mapping):
                pairs += [(str(path[-1]), v) for path, v in leaf_items(props)]
    spark = data.get("spark")
    if isinstance(spark, Mapping) and isinstance(spark.get("config"), Mapping):
        pairs += [(str(k), v) for k, v in spark["config"].items()]
    if isinstance(spark, Mapping):
        pairs.append(("auth_secret", spark.get("auth_secret")))
    agents = data.get("agents")
    if isinstance(agents, Mapping):
        pairs += [("token", a.get("token")) for a in agents.values() if isinstance(a, Mapping)]
    for key, value in pairs:
        if value is None or isinstance(value, bool):
            continue
        text = str(value)
        if is_safe_key(key):
            found += uri_secrets(text)
        elif is_secret_key(key) or not _NUMBER.fullmatch(text):  # a size or a count is no secret
            found.append(text)
    return found


def remember_secrets(values: Iterable[Any]) -> None:
    """Values :func:`redact_message` hides from now on in this process (the loaded settings' secrets)."""
    _KNOWN.update(v for v in (str(x) for x in values if x is not None) if len(v) >= _MIN_KNOWN)


def environment_secrets(environ: Mapping[str, str] | None = None) -> set[str]:
    """Values of the environment's secret-looking variables (AWS_SECRET_ACCESS_KEY, PGPASSWORD,
    PYICEBERG_CATALOG__X__CREDENTIAL ...) and the secret parts of any URI a variable holds."""
    found: set[str] = set()
    for name, value in (os.environ if environ is None else environ).items():
        if is_secret_key(name) and len(value) >= _MIN_ENV:
            found.add(value)
        found.update(s for s in uri_secrets(value) if len(s) >= _MIN_KNOWN)
    return found


def _encodings(secret: str) -> list[str]:
    """A secret as text may also carry it: itself, URL-encoded, base64."""
    b64 = base64.b64encode(secret.encode()).decode().rstrip("=")  # a prefix of the padded form too
    return list(dict.fromkeys((secret, quote(secret, safe=""), quote_plus(secret), b64)))


def _uri(match: re.Match[str]) -> str:
    token = match.group(0)
    uri = token.rstrip(_TRAILING)
    return redact_uri(uri) + token[len(uri) :]


def _pair(match: re.Match[str]) -> str:
    key, value = match.group("key"), match.group("value")
    # "InvalidTokenException: msg" is a class naming its message, not a key and its value.
    named = match.group("op") == ":" and key.endswith(("Exception", "Error", "Throwable"))
    if named or value.strip("\"'") == REDACTED or not is_secret_key(key):
        return match.group(0)
    q = value[0] if value[0] in "\"'" else ""
    return f"{key}{match.group('sep')}{match.group('scheme') or ''}{q}{REDACTED}{q}"


def redact_message(text: str) -> str:
    """Free text without secrets: known values (the loaded settings', the environment's, in their
    plain, URL-encoded and base64 forms), URI passwords and query values, values of secret-looking
    key=value pairs, AWS access key ids; each becomes ***."""
    known = _KNOWN | environment_secrets()
    for secret in sorted({e for s in known for e in _encodings(s)}, key=len, reverse=True):
        if secret in text:
            text = text.replace(secret, REDACTED)
    text = _TEXT_URI.sub(_uri, text)
    text = _USERINFO.sub(lambda m: f"{m.group(1)}:{REDACTED}@", text)
    text = _PAIR.sub(_pair, text)
    return _AWS_KEY_ID.sub(REDACTED, text)
