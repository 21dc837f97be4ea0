import pytest

from icelake_assets.catalog.spark_catalog import SPARK_CATALOG, spark_catalog_conf
from icelake_assets.settings import SettingsError


def test_sqlite_sql_catalog_maps_to_jdbc_with_one_writer():
    conf = spark_catalog_conf("demo", {"type": "sql", "uri": "sqlite:////data/c.db?timeout=30",
                                       "warehouse": "file:///data/wh"})
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
    conf = spark_catalog_conf("pg", {"type": "sql", "uri": "postgresql+psycopg2://ice:s%40cret@db:5433/lake",
                                     "warehouse": "s3://bucket/wh", "s3.endpoint": "http://minio:9000"})
    assert conf["spark.sql.catalog.pg.uri"] == "jdbc:postgresql://db:5433/lake"
    assert conf["spark.sql.catalog.pg.jdbc.user"] == "ice"
    assert conf["spark.sql.catalog.pg.jdbc.password"] == "s@cret"
    assert conf["spark.sql.catalog.pg.s3.endpoint"] == "http://minio:9000"


@pytest.mark.parametrize(
    "props, expected",
    [
        ({"type": "rest", "uri": "http://rest:8181", "credential": "id:secret"},
         {"type": "rest", "uri": "http://rest:8181", "credential": "id:secret"}),
        ({"uri": "https://rest.example/api"}, {"type": "rest", "uri": "https://rest.example/api"}),
        ({"type": "hive", "uri": "thrift://hms:9083"}, {"type": "hive", "uri": "thrift://hms:9083"}),
        ({"type": "glue", "warehouse": "s3://b/wh"},
         {"catalog-impl": "org.apache.iceberg.aws.glue.GlueCatalog", "io-impl": "org.apache.iceberg.aws.s3.S3FileIO",
          "warehouse": "s3://b/wh"}),
    ],
)
def test_other_catalog_types(props, expected):
    conf = spark_catalog_conf("c", props)
    assert {k.removeprefix("spark.sql.catalog.c."): v for k, v in conf.items() if k != "spark.sql.catalog.c"} == \
        {"cache-enabled": "false", **expected}


def test_unmapped_types_are_refused():
    with pytest.raises(SettingsError, match="type 'nessie' has no Spark mapping"):
        spark_catalog_conf("c", {"type": "nessie", "uri": "x"})
    with pytest.raises(SettingsError, match="only sqlite and postgresql"):
        spark_catalog_conf("c", {"type": "sql", "uri": "mysql://h/db"})
