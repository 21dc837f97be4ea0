import pytest

from icelake_assets.catalog.spark_catalog import SPARK_CATALOG, spark_catalog_conf
from icelake_assets.settings import SettingsError


def test_sqlite_sql_catalog_maps_to_jdbc_with_one_writer():
    conf = spark_catalog_conf(
        "demo", {"type": "sql", "uri": "sqlite:////data/c.db?timeout=30", "warehouse": "file:///data/wh"}
    )
    assert conf == {
        "spark.sql.catalog.demo": SPARK_CATALOG,
        "spark.sql.catalog.demo.cache-enabled": "false",
        "spark.sql.catalog.demo.type": "jdbc",
        "spark.sql.catalog.demo.uri": "jdbc:sqlite:/data/c.db",
        "spark.sql.catalog.demo.clients": "1",
        "spark.sql.catalog.demo.jdbc.busy_timeout": "60000",
        "spark.sql.catalog.demo.jdbc.init-catalog-tables": "false",
        "spark.sql.catalog.demo.warehouse": "file:///data/wh",
    }


def test_postgres_credentials_become_jdbc_properties():
    conf = spark_catalog_conf(
        "pg",
        {
            "type": "sql",
            "uri": "postgresql+psycopg2://ice:s%40cret@db:5433/lake",
            "warehouse": "s3://bucket/wh",
            "s3.endpoint": "http://minio:9000",
        },
    )
    assert conf["spark.sql.catalog.pg.uri"] == "jdbc:postgresql://db:5433/lake"
    assert conf["spark.sql.catalog.pg.jdbc.user"] == "ice"
    assert conf["spark.sql.catalog.pg.jdbc.password"] == "s@cret"
    assert conf["spark.sql.catalog.pg.s3.endpoint"] == "http://minio:9000"


@pytest.mark.parametrize(
    "props, expected",
    [
        (
            {"type": "rest", "uri": "http://rest:8181", "credential": "id:secret"},
            {"type": "rest", "uri": "http://rest:8181", "credential": "id:secret"},
        ),
        ({"uri": "https://rest.example/api"}, {"type": "rest", "uri": "https://rest.example/api"}),
        ({"type": "hive", "uri": "thrift://hms:9083"}, {"type": "hive", "uri": "thrift://hms:9083"}),
        (
            {"type": "glue", "warehouse": "s3://b/wh"},
            {
                "catalog-impl": "org.apache.iceberg.aws.glue.GlueCatalog",
                "io-impl": "org.apache.iceberg.aws.s3.S3FileIO",
                "warehouse": "s3://b/wh",
            },
        ),
    ],
)
def test_other_catalog_types(props, expected):
    conf = spark_catalog_conf("c", props)
    assert {
        k.removeprefix("spark.sql.catalog.c."): v for k, v in conf.items() if k != "spark.sql.catalog.c"
    } == {"cache-enabled": "false", **expected}


def test_unmapped_types_are_refused():
    with pytest.raises(SettingsError, match="type 'nessie' has no Spark mapping"):
        spark_catalog_conf("c", {"type": "nessie", "uri": "x"})
    with pytest.raises(SettingsError, match="only sqlite and postgresql"):
        spark_catalog_conf("c", {"type": "sql", "uri": "mysql://h/db"})


def _mapped(props: dict[str, str], name: str = "c") -> dict[str, str]:
    conf = spark_catalog_conf(name, props)
    assert conf.pop(f"spark.sql.catalog.{name}") == SPARK_CATALOG
    assert conf.pop(f"spark.sql.catalog.{name}.cache-enabled") == "false"
    return {k.removeprefix(f"spark.sql.catalog.{name}."): v for k, v in conf.items()}


def test_rest_maps_oauth2_headers_and_sigv4_to_iceberg_java_names():
    props = {
        "type": "rest",
        "uri": "https://rest.example/api",
        "warehouse": "prod",
        "credential": "id:secret",
        "oauth2-server-uri": "https://idp/token",
        "scope": "catalog",
        "audience": "lake",
        "resource": "urn:lake",
        "header.X-Iceberg-Access-Delegation": "vended-credentials",
        "rest.sigv4-enabled": "true",
        "rest.signing-region": "eu-west-1",
        "rest.signing-name": "execute-api",
        "snapshot-loading-mode": "refs",
        # pyiceberg-only settings: nothing in Iceberg Java reads them
        "py-io-impl": "pyiceberg.io.pyarrow.PyArrowFileIO",
        "hive.hive2-compatible": "true",
    }
    assert _mapped(props) == {
        "type": "rest",
        "uri": "https://rest.example/api",
        "warehouse": "prod",
        "credential": "id:secret",
        "oauth2-server-uri": "https://idp/token",
        "scope": "catalog",
        "audience": "lake",
        "resource": "urn:lake",
        "header.X-Iceberg-Access-Delegation": "vended-credentials",
        "snapshot-loading-mode": "refs",
        # Iceberg 1.10 deprecates rest.sigv4-enabled: the auth manager type says the same
        "rest.auth.type": "sigv4",
        "rest.signing-region": "eu-west-1",
        "rest.signing-name": "execute-api",
        "client.region": "eu-west-1",
    }


def test_rest_with_a_token_and_no_sigv4():
    assert _mapped({"uri": "http://rest:8181", "token": "t0k"}) == {
        "type": "rest",
        "uri": "http://rest:8181",
        "token": "t0k",
    }


def test_hive_is_inferred_from_a_thrift_uri_like_pyiceberg_does():
    props = {
        "uri": "thrift://hms-a:9083,thrift://hms-b:9083",
        "warehouse": "hdfs://nn/warehouse",
        "hive.kerberos-authentication": "true",
        "hive.kerberos-service-name": "hive",
        "lock-check-retries": "4",
    }
    assert _mapped(props) == {
        "type": "hive",
        "uri": "thrift://hms-a:9083,thrift://hms-b:9083",
        "warehouse": "hdfs://nn/warehouse",
        "hadoop.hive.metastore.sasl.enabled": "true",
    }


def test_glue_maps_region_catalog_id_and_s3_credentials():
    props = {
        "type": "glue",
        "warehouse": "s3://b/wh",
        "glue.id": "123456789012",
        "glue.region": "eu-west-1",
        "glue.endpoint": "https://glue.eu-west-1.amazonaws.com",
        "glue.skip-archive": "true",
        "glue.access-key-id": "AKIAGLUE",
        "glue.secret-access-key": "glue-secret",
        "glue.profile-name": "p",
        "client.access-key-id": "AKIACLIENT",
        "client.secret-access-key": "client-secret",
        "s3.endpoint": "https://s3.eu-west-1.amazonaws.com",
    }
    assert _mapped(props) == {
        "catalog-impl": "org.apache.iceberg.aws.glue.GlueCatalog",
        "io-impl": "org.apache.iceberg.aws.s3.S3FileIO",
        "warehouse": "s3://b/wh",
        "glue.id": "123456789012",
        "glue.endpoint": "https://glue.eu-west-1.amazonaws.com",
        "glue.skip-archive": "true",
        "client.region": "eu-west-1",
        "s3.endpoint": "https://s3.eu-west-1.amazonaws.com",
        # pyiceberg's client.* credentials are S3FileIO's s3.* keys in Java (glue.* keys have no Java twin)
        "s3.access-key-id": "AKIACLIENT",
        "s3.secret-access-key": "client-secret",
    }


def test_explicit_s3_credentials_and_client_region_win_over_fallbacks():
    props = {
        "type": "glue",
        "client.region": "us-east-1",
        "glue.region": "eu-west-1",
        "client.access-key-id": "AKIACLIENT",
        "s3.access-key-id": "AKIAS3",
    }
    mapped = _mapped(props)
    assert mapped["client.region"] == "us-east-1" and mapped["s3.access-key-id"] == "AKIAS3"


def test_every_mapped_credential_is_recognised_as_a_secret():
    """Secrets stay out of Dagster resource config (spark_config(include_secrets=False)) by their name."""
    from icelake_assets.settings import is_secret_key

    secret = "s3cr3t"
    confs = [
        spark_catalog_conf("r", {"uri": "http://r", "credential": secret, "token": secret}),
        spark_catalog_conf(
            "g", {"type": "glue", "client.secret-access-key": secret, "client.session-token": secret}
        ),
        spark_catalog_conf("p", {"type": "sql", "uri": f"postgresql://u:{secret}@db/lake"}),
    ]
    leaked = [k for conf in confs for k, v in conf.items() if secret in v and not is_secret_key(k)]
    assert leaked == []


@pytest.mark.parametrize(
    "props, message",
    [
        ({"type": "rest"}, "type 'rest' needs `uri`"),
        ({"type": "hive"}, "type 'hive' needs `uri`"),
        ({"type": "sql"}, "type 'sql' needs `uri`"),
        ({"uri": "mongodb://db/x"}, "cannot be inferred from uri scheme 'mongodb'"),
        ({"warehouse": "s3://b/wh"}, "set `type` .* or a `uri`"),
    ],
)
def test_incomplete_catalogs_are_refused_with_the_cause(props, message):
    with pytest.raises(SettingsError, match=message):
        spark_catalog_conf("c", props)
