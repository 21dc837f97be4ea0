"""Redaction: literal secrets are refused, secrets from the environment never print, only values known to
be safe do."""

import pytest

from icelake_assets.settings import (
    SettingsError,
    is_safe_key,
    literal_secrets,
    load_settings,
    redact_message,
    redact_uri,
    uri_secrets,
)
from icelake_assets_tests.settings.conftest import CAT, write


@pytest.mark.parametrize(
    "text, key",
    [
        (
            "catalogs:\n  c1: {type: rest, uri: 'http://x', credential: 'id:hunter2'}\n",
            r"catalogs\.c1\.credential",
        ),
        (
            "catalogs:\n  c1: {type: sql, uri: 'sqlite:///c.db', s3.secret-access-key: hunter2}\n",
            r"catalogs\.c1\['s3\.secret-access-key'\]",
        ),
        ("catalogs:\n  c1: {type: sql, uri: 'postgresql://u:hunter2@db/lake'}\n", r"catalogs\.c1\.uri"),
        ("catalogs:\n  c1: {type: rest, uri: 'http://x', token: '${T:-hunter2}'}\n", r"catalogs\.c1\.token"),
        (
            CAT + "spark:\n  config: {spark.hadoop.fs.s3a.secret.key: hunter2}\n",
            r"spark\.config\['spark\.hadoop",
        ),
        # Forms the old marker list missed (issue 10 item 6): unknown catalog keys mean secret, ...
        (
            "catalogs:\n  c1: {type: sql, uri: 'sqlite:///c.db', "
            "adls.connection-string: 'AccountKey=hunter2'}\n",
            r"catalogs\.c1\['adls\.connection-string'\]",
        ),
        (
            "catalogs:\n  c1: {type: rest, uri: 'http://x', header.X-Api-Key: hunter2}\n",
            r"catalogs\.c1\['header\.X-Api",
        ),
        (
            "catalogs:\n  c1: {type: rest, uri: 'http://x', vendor.opaque: hunter2}\n",
            r"catalogs\.c1\['vendor\.opaque'\]",
        ),
        # ... a password in a URI's query string, ...
        (
            "catalogs:\n  c1: {type: sql, uri: 'postgresql://db/lake?user=u&password=hunter2'}\n",
            r"catalogs\.c1\.uri",
        ),
        # ... and key-looking Spark settings.
        (
            CAT + "spark:\n  config: {spark.hadoop.fs.s3a.bucket.b.access.key: hunter2}\n",
            r"spark\.config\['spark\.hadoop",
        ),
        (
            CAT + "spark:\n  config: {spark.hadoop.fs.azure.account.key.a.dfs.core.windows.net: hunter2}\n",
            r"spark\.config\['spark\.hadoop\.fs\.azure",
        ),
    ],
)
def test_literal_secrets_are_refused_without_echoing_them(tmp_path, text, key):
    path = write(tmp_path, text)
    with pytest.raises(SettingsError, match=key + r".*literal secret is refused") as err:
        load_settings(path)
    assert "hunter2" not in str(err.value) and str(path) in str(err.value)
    if "s3.secret" in text:  # the pyiceberg way is suggested too
        assert "or set PYICEBERG_CATALOG__C1__S3__SECRET_ACCESS_KEY" in str(err.value)


def test_secrets_from_the_environment_never_print(tmp_path, monkeypatch):
    monkeypatch.setenv("PG_PASSWORD", "hunter2")
    monkeypatch.setenv("S3_SECRET", "s3cr3t-value")
    s = load_settings(
        write(
            tmp_path,
            "catalogs:\n  c1: {type: sql, uri: 'postgresql://u:${PG_PASSWORD}@db/lake', "
            "s3.secret-access-key: '${S3_SECRET}'}\n",
        )
    )
    props = s.catalog_properties("c1")  # the real values reach pyiceberg and Spark ...
    assert (
        props["uri"] == "postgresql://u:hunter2@db/lake" and props["s3.secret-access-key"] == "s3cr3t-value"
    )
    for text in (repr(s), str(s), str(s.redacted_catalog_properties("c1"))):  # ... and never a printout
        assert "hunter2" not in text and "s3cr3t-value" not in text
    assert s.redacted_catalog_properties("c1")["uri"] == "postgresql://u:***@db/lake"


def test_only_values_known_to_be_safe_print(tmp_path, monkeypatch):
    """Redaction by what is known to be safe: every form issue 10 found printed now prints as ***."""
    values = {
        "ADLS": "AccountKey=adls-hunter2",
        "HDR": "Bearer hdr-hunter2",
        "API": "api-hunter2",
        "PW": "pw-hunter2",
        "SIG": "sig-hunter2",
        "S3A": "s3a-hunter2",
        "OPAQUE": "opaque-hunter2",
    }
    for var, value in values.items():
        monkeypatch.setenv(var, value)
    s = load_settings(
        write(
            tmp_path,
            (
                "catalogs:\n  c1: {type: sql, uri: 'postgresql://u@db/lake?sslmode=require&password=${PW}', "
                "warehouse: 's3://b/wh', s3.region: eu-west-1, "
                "s3.endpoint: 'http://minio:9000/?X-Amz-Signature=${SIG}', "
                "adls.connection-string: '${ADLS}', header.Authorization: '${HDR}', "
                "header.X-Api-Key: '${API}', vendor.opaque: '${OPAQUE}'}\n"
                "spark:\n  config: {spark.hadoop.fs.s3a.bucket.b.access.key: '${S3A}', "
                "spark.executor.memory: 4g, "
                "spark.executor.extraJavaOptions: '-Dx=${OPAQUE}'}\n"
            ),
        )
    )
    shown = s.redacted_catalog_properties("c1")
    assert shown == {
        "type": "sql",
        "uri": "postgresql://u@db/lake?sslmode=***&password=***",
        "warehouse": "s3://b/wh",
        "s3.region": "eu-west-1",
        "s3.endpoint": "http://minio:9000/?X-Amz-Signature=***",
        "adls.connection-string": "***",
        "header.Authorization": "***",
        "header.X-Api-Key": "***",
        "vendor.opaque": "***",
    }
    text = repr(s) + str(s) + str(shown)
    assert "4g" in text and not [v for v in values.values() if v.split("=")[-1] in text]


def test_literal_secrets_are_found_by_key_path_and_references_pass():
    data = {
        "catalogs": {
            "c1": {
                "type": "rest",
                "uri": "http://x",
                "warehouse": "s3://b/wh",
                "token": "${T}",
                "credential": "id:hunter2",
                "vendor.opaque": "hunter2",
                "s3.secret-access-key": "${S:-hunter2}",  # a default is a literal
            },
            "c2": None,  # taken whole from pyiceberg's configuration
        },
        "spark": {
            "config": {
                "spark.executor.memory": "4g",
                "spark.executor.extraJavaOptions": "-Dx=1",  # unknown Spark key: printed ***, not refused
                "spark.hadoop.fs.s3a.secret.key": "hunter2",
            }
        },
    }
    assert literal_secrets(data) == [
        ("catalogs", "c1", "credential"),
        ("catalogs", "c1", "vendor.opaque"),
        ("catalogs", "c1", "s3.secret-access-key"),
        ("spark", "config", "spark.hadoop.fs.s3a.secret.key"),
    ]
    assert literal_secrets({"catalogs": {"c1": {"uri": "postgresql://u:${PW}@db/lake?password=${PW}"}}}) == []


@pytest.mark.parametrize(
    "key, safe",
    [
        ("s3.region", True),
        ("rest.signing-region", True),
        ("spark.sql.catalog.lake", True),
        ("spark.sql.catalog.lake.uri", True),
        ("spark.sql.catalog.lake.token", False),
        ("s3.secret-access-key", False),
        ("vendor.opaque", False),  # unknown means secret
    ],
)
def test_only_keys_known_to_configure_are_safe(key, safe):
    assert is_safe_key(key) is safe


def test_a_uri_loses_its_password_query_values_and_fragment():
    uri = "jdbc:postgresql://u:pw@db:5432/lake?user=u&password=p&flag#frag"
    assert redact_uri(uri) == "jdbc:postgresql://u:***@db:5432/lake?user=***&password=***&***#***"
    assert uri_secrets(uri) == ["pw", "u", "p", "flag", "frag"]
    assert redact_uri("s3://b/wh") == "s3://b/wh" and uri_secrets("s3://b/wh") == []


@pytest.mark.parametrize(
    "text, shown",
    [
        (
            "jdbc:postgresql://u:pw-123@db/lake?sslmode=require).",
            "jdbc:postgresql://u:***@db/lake?sslmode=***).",
        ),
        ("s3a://AKIAIOSFODNN7EXAMPLE:wJalr/XUtn@bucket/x", "s3a://***:***@bucket/x"),
        ("fs.s3a.secret.key=abc/def== token: t0k3n x", "fs.s3a.secret.key=*** token: *** x"),
        ('{"client_secret": "s3c", "client_id": "lake"}', '{"client_secret": "***", "client_id": "lake"}'),
        ("Authorization: Bearer eyJ.x.y", "Authorization: Bearer ***"),
        ("key ASIAY34FZKBOKMUTVV7A used", "key *** used"),
    ],
)
def test_free_text_loses_secrets_by_shape(text, shown):
    assert redact_message(text) == shown


@pytest.mark.parametrize(
    "text",
    [
        "java.io.FileNotFoundException: /lake/t/data/0.parquet (Permission denied)",
        "InvalidTokenException: Token expired; NoSuchKey: The specified key does not exist",
        'FATAL: password authentication failed for user "icelake"',
        "token_url=http://auth:8080/token, status code: 401",
    ],
)
def test_free_text_without_secrets_is_left_as_it_is(text):
    assert redact_message(text) == text
