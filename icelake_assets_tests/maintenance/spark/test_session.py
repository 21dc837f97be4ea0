import ipaddress
import os
from pathlib import Path

import pytest

from icelake_assets.catalog.spark_storage import HADOOP_FILE_IO, S3A_FILESYSTEM
from icelake_assets.maintenance.spark.session import (
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
            # Not about Spark's authentication (settings/test_spark_authentication.py): opted out.
            "spark": {
                "master": "spark://m:7077",
                "authenticate": False,
                "config": {"spark.executor.memory": "4g"},
            },
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
    from icelake_assets.maintenance.spark import session as spark_session

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


# -- issue 20: a lake on S3 behind a REST catalog ----------------------------------------------------


def _s3_settings(tmp_path, catalogs, spark=None):
    return parse_settings(
        {"catalogs": catalogs, "spark": spark or {}}, str(tmp_path / "icelake.yaml"), tmp_path
    )


@pytest.fixture
def s3a_jars_dir(tmp_path, monkeypatch):
    folder = tmp_path / "jars"
    folder.mkdir()
    for name in ("hadoop-aws-3.3.1.jar", "aws-java-sdk-bundle-1.11.901.jar"):
        (folder / name).write_bytes(b"PK")
    monkeypatch.setenv("ICELAKE_JARS_DIR", str(folder))
    return folder


REST_S3 = {
    "type": "rest",
    "uri": "http://127.0.0.1:8181",
    "warehouse": "s3://warehouse/",
    "auth": {"type": "noop"},
    "s3.endpoint": "http://127.0.0.1:8333",
    "s3.region": "us-east-1",
}


def test_an_s3_catalog_reaches_s3a_from_its_pyiceberg_properties_alone(tmp_path, monkeypatch, s3a_jars_dir):
    monkeypatch.setenv("LAKE_KEY", "AKIAEXAMPLE")
    monkeypatch.setenv("LAKE_SECRET", "s3-hunter2")
    props = {**REST_S3, "s3.access-key-id": "${LAKE_KEY}", "s3.secret-access-key": "${LAKE_SECRET}"}
    settings = _s3_settings(tmp_path, {"lake": props})
    conf = spark_config(settings)
    assert conf["spark.hadoop.fs.s3.impl"] == conf["spark.hadoop.fs.s3a.impl"] == S3A_FILESYSTEM
    assert conf["spark.hadoop.fs.s3a.endpoint"] == "http://127.0.0.1:8333"
    assert conf["spark.hadoop.fs.s3a.path.style.access"] == "true"  # a custom endpoint: path style
    assert conf["spark.hadoop.fs.s3a.connection.ssl.enabled"] == "false"
    assert conf["spark.hadoop.fs.s3a.access.key"] == "AKIAEXAMPLE"
    assert conf["spark.hadoop.fs.s3a.secret.key"] == "s3-hunter2"
    # the catalog's own FileIO: Hadoop's (S3FileIO's AWS SDK is not on the class path), same options
    assert conf["spark.sql.catalog.lake.io-impl"] == HADOOP_FILE_IO
    assert conf["spark.sql.catalog.lake.hadoop.fs.s3a.secret.key"] == "s3-hunter2"
    assert conf["spark.sql.catalog.lake.rest.auth.type"] == "none"
    jars = conf["spark.jars"].split(",")
    assert jars[0] == iceberg_runtime_jar()
    assert {str(p) for p in s3a_jars_dir.iterdir()} <= set(jars)
    # Directory markers kept: no bulk delete of markers, no MultiObjectDelete warnings (test_s3_rest.py).
    assert conf["spark.hadoop.fs.s3a.directory.marker.retention"] == "keep"
    public = spark_config(settings, include_secrets=False)
    assert "s3-hunter2" not in repr(public) and "AKIAEXAMPLE" not in repr(public)
    assert public["spark.hadoop.fs.s3a.endpoint"] == "http://127.0.0.1:8333"  # safe keys stay visible
    assert {**public, **secret_spark_config(settings)} == conf


def test_s3a_credentials_come_from_the_environment_when_the_properties_have_none(
    tmp_path, monkeypatch, s3a_jars_dir
):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAENV")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "env-hunter2")
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    conf = spark_config(_s3_settings(tmp_path, {"lake": REST_S3}))
    assert conf["spark.hadoop.fs.s3a.access.key"] == "AKIAENV"
    assert conf["spark.hadoop.fs.s3a.secret.key"] == "env-hunter2"
    anonymous = spark_config(_s3_settings(tmp_path, {"lake": {**REST_S3, "s3.anonymous": "true"}}))
    assert anonymous["spark.hadoop.fs.s3a.aws.credentials.provider"].endswith(
        "AnonymousAWSCredentialsProvider"
    )
    assert "spark.hadoop.fs.s3a.access.key" not in anonymous


def test_s3_jars_and_file_io_given_by_the_user_are_not_doubled(tmp_path, s3a_jars_dir):
    packages = ("org.apache.hadoop:hadoop-aws:3.3.4", "org.apache.iceberg:iceberg-aws-bundle:1.10.2")
    conf = spark_config(_s3_settings(tmp_path, {"lake": REST_S3}, {"packages": list(packages)}))
    assert not any("icelake" in j or "hadoop-aws-3.3.1" in j for j in conf.get("spark.jars", "").split(","))
    assert "spark.sql.catalog.lake.io-impl" not in conf  # S3FileIO is there: Iceberg's default stays
    user_jars = "/opt/jars/my-udfs.jar"
    conf = spark_config(_s3_settings(tmp_path, {"lake": REST_S3}, {"config": {"spark.jars": user_jars}}))
    jars = conf["spark.jars"].split(",")
    # the user's jar, the Iceberg runtime and the S3A jars: all present
    assert jars[0] == iceberg_runtime_jar() and jars[-1] == user_jars
    assert str(s3a_jars_dir / "hadoop-aws-3.3.1.jar") in jars


def test_catalogs_that_disagree_on_s3_keep_their_own_options(tmp_path, s3a_jars_dir):
    other = {**REST_S3, "s3.endpoint": "https://s3.eu-west-1.amazonaws.com"}
    conf = spark_config(_s3_settings(tmp_path, {"a": REST_S3, "b": other}))
    assert "spark.hadoop.fs.s3a.endpoint" not in conf  # no silent winner for the session
    assert conf["spark.sql.catalog.a.hadoop.fs.s3a.endpoint"] == "http://127.0.0.1:8333"
    assert conf["spark.sql.catalog.b.hadoop.fs.s3a.endpoint"] == "https://s3.eu-west-1.amazonaws.com"
    assert conf["spark.hadoop.fs.s3.impl"] == S3A_FILESYSTEM  # what they agree on is session-wide


def test_a_lake_without_s3_gets_no_s3a(tmp_path, s3a_jars_dir):
    conf = spark_config(_s3_settings(tmp_path, {"c": {"type": "sql", "uri": "sqlite:///c.db"}}))
    assert not any("fs.s3" in k for k in conf) and "hadoop-aws" not in conf["spark.jars"]


@pytest.mark.parametrize(
    "master, config, expected",
    [
        ("local[2]", {}, {"spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1"}),
        ("local", {}, {"spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1"}),
        ("local[*, 3]", {}, {"spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1"}),
        # The user's choice, whole: Spark derives the other key from the one set.
        ("local[2]", {"spark.driver.host": "10.1.2.3"}, {"spark.driver.host": "10.1.2.3"}),
        ("local[2]", {"spark.driver.bindAddress": "0.0.0.0"}, {"spark.driver.bindAddress": "0.0.0.0"}),
        # A cluster master: executors elsewhere must reach the driver, the user's settings stand.
        ("spark://m:7077", {}, {}),
        ("yarn", {}, {}),
        ("spark://m:7077", {"spark.driver.host": "runs.internal"}, {"spark.driver.host": "runs.internal"}),
        ("local[2]", {"spark.master": "spark://m:7077"}, {}),  # spark.config's master wins
    ],
)
def test_a_local_driver_listens_on_loopback_a_cluster_driver_as_the_user_says(
    tmp_path, master, config, expected
):
    """Issue 31 item 7: the driver's RPC and block manager ports listened on the routable address."""
    settings = parse_settings(
        {
            "catalogs": {"c": {"type": "sql", "uri": "sqlite:///c.db"}},
            "spark": {"master": master, "config": config, "authenticate": False},
        },
        str(tmp_path / "icelake.yaml"),
        tmp_path,
    )
    keys = ("spark.driver.host", "spark.driver.bindAddress")
    conf = spark_config(settings)
    assert {k: conf[k] for k in keys if k in conf} == expected
    if not config:  # ours are plain values: in the resource config the UI shows
        public = spark_config(settings, include_secrets=False)
        assert {k: public[k] for k in keys if k in public} == expected


def _address(hex_address: str) -> str:
    """An address of /proc/net/tcp{,6}: 32-bit words in host (little-endian) order."""
    raw = bytes.fromhex(hex_address)
    words = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
    if len(words) == 4:
        return str(ipaddress.IPv4Address(words))
    v6 = ipaddress.IPv6Address(words)
    return str(v6.ipv4_mapped or v6)


def _listening(pid: int) -> set[tuple[str, int]]:
    """(address, port) of each TCP socket the process listens on: its socket inodes in /proc/<pid>/fd,
    looked up in its network namespace's tables (state 0A: LISTEN)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:  # closed meanwhile
            continue
        if target.startswith("socket:["):
            inodes.add(target[len("socket:[") : -1])
    found = set()
    for table in ("tcp", "tcp6"):
        for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
            fields = line.split()
            local, state, inode = fields[1], fields[3], fields[9]
            if state == "0A" and inode in inodes:
                address, port = local.rsplit(":", 1)
                found.add((_address(address), int(port, 16)))
    return found


def test_the_driver_jvm_listens_on_loopback_only(make_lake, spark_for):
    """Every port of the driver JVM of a local master (Py4J gateway, RPC, block manager): 127.0.0.1."""
    spark = spark_for(make_lake())
    jvm = spark.sparkContext._jvm
    pid = jvm.java.lang.ProcessHandle.current().pid()
    listening = _listening(pid)
    ports = {port for _, port in listening}
    block_manager = spark.sparkContext._jsc.sc().env().blockManager().blockManagerId().port()
    assert {int(spark.conf.get("spark.driver.port")), block_manager} <= ports, listening
    assert {address for address, _ in listening} == {"127.0.0.1"}, listening
