import pytest

from icelake_assets.maintenance.spark_session import (
    SparkSetupError,
    iceberg_runtime_jar,
    secret_spark_config,
    spark_config,
)
from icelake_assets.settings import parse_settings


def _settings(tmp_path, monkeypatch):
    monkeypatch.setenv("PG_PASSWORD", "s3cr3t")
    return parse_settings(
        {
            "catalogs": {
                "pg": {
                    "type": "sql",
                    "warehouse": "s3://b/wh",
                    "uri": "postgresql+psycopg2://ice:${PG_PASSWORD}@db:5432/lake",
                }
            },
            "spark": {"master": "spark://m:7077", "config": {"spark.executor.memory": "4g"}},
        },
        str(tmp_path / "icelake.yaml"),
        tmp_path,
    )


def test_runtime_jar_jni_and_catalogs_are_configured(tmp_path, monkeypatch):
    conf = spark_config(_settings(tmp_path, monkeypatch))
    assert conf["spark.master"] == "spark://m:7077" and conf["spark.executor.memory"] == "4g"
    assert iceberg_runtime_jar() in conf["spark.jars"] and "2.12" in iceberg_runtime_jar()
    assert conf["spark.sql.extensions"].endswith("IcebergSparkSessionExtensions")
    assert conf["spark.sql.catalog.pg.uri"] == "jdbc:postgresql://db:5432/lake"
    assert conf["spark.sql.catalog.pg.jdbc.password"] == "s3cr3t"


def test_credentials_stay_out_of_resource_config(tmp_path, monkeypatch):
    settings = _settings(tmp_path, monkeypatch)
    public = spark_config(settings, include_secrets=False)
    assert "s3cr3t" not in repr(public) and "spark.sql.catalog.pg.jdbc.password" not in public
    # Unknown means secret: the JDBC user is not known to be safe, so it is added at runtime too.
    assert secret_spark_config(settings) == {
        "spark.sql.catalog.pg.jdbc.password": "s3cr3t",
        "spark.sql.catalog.pg.jdbc.user": "ice",
    }
    assert {**public, **secret_spark_config(settings)} == spark_config(settings)


def test_maven_packages_replace_the_bundled_runtime(tmp_path, monkeypatch):
    settings = _settings(tmp_path, monkeypatch).model_copy(
        update={
            "spark": _settings(tmp_path, monkeypatch).spark.model_copy(
                update={"packages": ("org.apache.iceberg:iceberg-spark-runtime-3.5_2.12:1.10.2",)}
            )
        }
    )
    conf = spark_config(settings)
    assert conf["spark.jars.packages"] == "org.apache.iceberg:iceberg-spark-runtime-3.5_2.12:1.10.2"
    assert iceberg_runtime_jar() not in conf.get("spark.jars", "")


def test_a_users_jars_and_jvm_options_add_to_the_products_never_replace_them(tmp_path, monkeypatch):
    """Issue 20: spark.jars in spark.config replaced the Iceberg runtime (PARSE_SYNTAX_ERROR at CALL)."""
    base = _settings(tmp_path, monkeypatch)
    user = {
        "spark.jars": "/opt/jars/hadoop-aws-3.3.1.jar,/opt/jars/aws-java-sdk-bundle-1.11.901.jar",
        "spark.driver.extraJavaOptions": "-Dcom.amazonaws.services.s3.enableV4=true",
        "spark.executor.memory": "4g",
    }
    settings = base.model_copy(update={"spark": base.spark.model_copy(update={"config": user})})
    conf = spark_config(settings)
    jars = conf["spark.jars"].split(",")
    assert jars[0] == iceberg_runtime_jar() and "/usr/share/java/postgresql.jar" in jars
    assert jars[-2:] == user["spark.jars"].split(",")
    options = conf["spark.driver.extraJavaOptions"].split(" ")
    assert options[0].startswith("-Djava.library.path=")
    assert options[-1] == user["spark.driver.extraJavaOptions"]
    assert conf["spark.executor.memory"] == "4g"  # other options: the user's value, as before
    # Resource config (what the UI shows) plus what the resource adds at runtime is the same whole.
    assert {**spark_config(settings, include_secrets=False), **secret_spark_config(settings)} == conf


def test_both_jdbc_drivers_ship_to_the_cluster_with_the_runtime(tmp_path, monkeypatch):
    jars = spark_config(_settings(tmp_path, monkeypatch))["spark.jars"].split(",")
    assert "/usr/share/java/postgresql.jar" in jars and "/usr/share/java/sqlite-jdbc.jar" in jars


def test_a_missing_jdbc_driver_is_named_with_what_to_install(tmp_path, monkeypatch):
    from icelake_assets.maintenance import spark_session

    missing = str(tmp_path / "absent" / "postgresql.jar")
    monkeypatch.setitem(
        spark_session._DRIVERS,
        "jdbc:postgresql:",
        (missing, "libpostgresql-jdbc-java", "org.postgresql:postgresql"),
    )
    with pytest.raises(
        SparkSetupError,
        match="catalog 'pg' .postgresql. needs the JDBC driver .*"
        "libpostgresql-jdbc-java, or add org.postgresql:postgresql",
    ):
        spark_config(_settings(tmp_path, monkeypatch))
    settings = _settings(tmp_path, monkeypatch)
    online = settings.model_copy(
        update={
            "spark": settings.spark.model_copy(update={"packages": ("org.postgresql:postgresql:42.7.4",)})
        }
    )
    assert spark_config(online)["spark.sql.catalog.pg.uri"].startswith("jdbc:postgresql:")


@pytest.mark.parametrize(
    "spark, message",
    [
        ({"master": "sc://connect:15002"}, "Spark Connect is not supported"),
        ({"master": "yarn", "config": {"spark.submit.deployMode": "cluster"}}, "deployMode must be 'client'"),
    ],
)
def test_a_driver_outside_the_run_process_is_refused_with_the_reason(tmp_path, spark, message):
    settings = parse_settings(
        {"catalogs": {"c": {"type": "sql", "uri": "sqlite:///c.db"}}, "spark": spark},
        str(tmp_path / "icelake.yaml"),
        tmp_path,
    )
    with pytest.raises(SparkSetupError, match=message):
        spark_config(settings)


def test_resource_config_keeps_only_what_is_known_to_be_safe(tmp_path, monkeypatch):
    """Issue 10 item 6: secrets under keys the old detector missed reached Dagster resource config."""
    planted = {
        "ADLS": "AccountKey=adls-hunter2",
        "HDR": "hdr-hunter2",
        "SIG": "sig-hunter2",
        "S3A": "s3a-hunter2",
        "PW": "pw-hunter2",
    }
    for var, value in planted.items():
        monkeypatch.setenv(var, value)
    settings = parse_settings(
        {
            "catalogs": {
                "pg": {
                    "type": "sql",
                    "uri": "postgresql://ice@db/lake?password=${PW}",
                    "warehouse": "s3://b/wh",
                    "adls.connection-string": "${ADLS}",
                    "header.X-Api-Key": "${HDR}",
                    "s3.region": "eu-west-1",
                    "s3.endpoint": "http://minio:9000/?X-Amz-Signature=${SIG}",
                }
            },
            "spark": {
                "config": {"spark.hadoop.fs.s3a.bucket.b.access.key": "${S3A}", "spark.executor.memory": "4g"}
            },
        },
        str(tmp_path / "icelake.yaml"),
        tmp_path,
    )
    public, full = spark_config(settings, include_secrets=False), spark_config(settings)
    assert not [v for v in planted.values() if v in repr(public)]
    # Spark still gets every one at runtime (header.* is forwarded to REST catalogs only).
    assert all(v in repr(full) for k, v in planted.items() if k != "HDR")
    assert public["spark.sql.catalog.pg.s3.region"] == "eu-west-1" and public["spark.executor.memory"] == "4g"
    assert public["spark.sql.catalog.pg.warehouse"] == "s3://b/wh"
    assert "spark.sql.catalog.pg.uri" not in public  # its query holds the password
    assert {**public, **secret_spark_config(settings)} == full
