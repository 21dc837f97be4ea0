"""pyiceberg's nested catalog properties (issue 20): an open REST catalog needs `auth: {type: noop}`,
OAuth2 client credentials live under `auth.oauth2`; secrets inside them are judged by their own key,
redacted by key, and reach Spark's REST client under Iceberg Java's names."""

import pytest

from icelake_assets.catalog.connection import redact_text
from icelake_assets.catalog.spark_catalog import spark_catalog_conf
from icelake_assets.settings import SettingsError, load_settings
from icelake_assets_tests.settings.conftest import write

REST = "catalogs:\n  lake:\n    type: rest\n    uri: http://127.0.0.1:8181\n"


def test_an_open_rest_catalog_is_configured_with_auth_noop(tmp_path):
    settings = load_settings(write(tmp_path, REST + "    auth: {type: noop}\n"))
    assert settings.catalogs["lake"]["auth"] == {"type": "noop"}
    conf = spark_catalog_conf("lake", settings.catalog_properties("lake"))
    assert conf["spark.sql.catalog.lake.rest.auth.type"] == "none"


def test_a_literal_secret_inside_a_nested_property_is_refused_naming_its_path(tmp_path):
    text = REST + "    auth:\n      type: oauth2\n      oauth2: {client_id: me, client_secret: hunter22}\n"
    with pytest.raises(SettingsError) as err:
        load_settings(write(tmp_path, text))
    assert "catalogs.lake.auth.oauth2.client_secret: a literal secret is refused" in str(err.value)
    assert "hunter22" not in str(err.value)


def test_nested_secrets_from_the_environment_reach_spark_and_never_print(tmp_path, monkeypatch):
    monkeypatch.setenv("LAKE_ID", "client-id-123")
    monkeypatch.setenv("LAKE_SECRET", "s3cr3t-value-456")
    text = (
        REST + "    auth:\n      type: oauth2\n      oauth2:\n"
        "        client_id: ${LAKE_ID}\n        client_secret: ${LAKE_SECRET}\n"
        "        token_url: http://127.0.0.1:8181/v1/oauth/tokens\n"
    )
    settings = load_settings(write(tmp_path, text))
    props = settings.catalog_properties("lake")
    shown = repr(settings.redacted_catalog_properties("lake"))
    assert "s3cr3t-value-456" not in shown and "client-id-123" not in shown and "oauth2" in shown
    assert "token_url" in shown and "v1/oauth/tokens" in shown  # safe keys still show
    conf = spark_catalog_conf("lake", props)
    assert conf["spark.sql.catalog.lake.rest.auth.type"] == "oauth2"
    assert conf["spark.sql.catalog.lake.credential"] == "client-id-123:s3cr3t-value-456"
    assert conf["spark.sql.catalog.lake.oauth2-server-uri"] == "http://127.0.0.1:8181/v1/oauth/tokens"
    # a driver error echoing a nested secret is redacted by its own key
    assert "s3cr3t-value-456" not in redact_text("401: bad secret s3cr3t-value-456", props)


def test_an_auth_type_without_a_java_counterpart_is_refused_for_spark(tmp_path):
    settings = load_settings(write(tmp_path, REST + "    auth: {type: google}\n"))
    with pytest.raises(SettingsError, match="auth type 'google' has no counterpart"):
        spark_catalog_conf("lake", settings.catalog_properties("lake"))


def test_ssl_certificate_paths_are_accepted_and_the_private_key_comes_from_the_environment(
    tmp_path, monkeypatch
):
    ssl = "    ssl:\n      cabundle: /etc/ssl/lake-ca.pem\n      client: {cert: /etc/ssl/me.pem, key: 'KEYFILE'}\n"
    with pytest.raises(SettingsError, match=r"catalogs.lake.ssl.client.key: a literal secret"):
        load_settings(write(tmp_path, REST + ssl))
    monkeypatch.setenv("LAKE_TLS_KEY", "/run/secrets/me.key")
    settings = load_settings(write(tmp_path, REST + ssl.replace("KEYFILE", "${LAKE_TLS_KEY}")))
    assert settings.catalogs["lake"]["ssl"] == {
        "cabundle": "/etc/ssl/lake-ca.pem",
        "client": {"cert": "/etc/ssl/me.pem", "key": "/run/secrets/me.key"},
    }
    shown = settings.redacted_catalog_properties("lake")["ssl"]
    assert shown == {"cabundle": "/etc/ssl/lake-ca.pem", "client": {"cert": "/etc/ssl/me.pem", "key": "***"}}


def test_sigv4_catalogs_have_boto3():
    """pyiceberg signs REST requests with boto3 (rest.sigv4-enabled): it is a dependency, not a surprise
    at the first request (`No module named 'boto3'`)."""
    import importlib.metadata

    requirements = importlib.metadata.requires("icelake_assets") or []
    assert any(r.startswith("pyiceberg[") and "rest-sigv4" in r for r in requirements)
    import boto3  # noqa: F401
