"""spark_config with scan_reports.dir: the reporter jar and, per catalog, the reporter class and its
folder (a user's own reporter kept); a missing jar named with how to build it."""

import pytest

from icelake_assets.maintenance.spark import reporter_jar
from icelake_assets.maintenance.spark.reporter_jar import DIR_PROPERTY, REPORTER_CLASS, REPORTER_JAR
from icelake_assets.maintenance.spark.session import SparkSetupError, spark_config
from icelake_assets.settings import parse_settings

CATALOGS = {"a": {"type": "sql", "uri": "sqlite:///a.db"}, "b": {"type": "sql", "uri": "sqlite:///b.db"}}


@pytest.fixture
def jars(tmp_path, monkeypatch):
    folder = tmp_path / "jars"
    folder.mkdir()
    monkeypatch.setenv("ICELAKE_JARS_DIR", str(folder))
    return folder


def _settings(tmp_path, scan_reports=None, config=None):
    data = {"catalogs": CATALOGS, "spark": {"config": config or {}}}
    if scan_reports is not None:
        data["scan_reports"] = scan_reports
    return parse_settings(data, str(tmp_path / "i.yaml"), tmp_path)


def test_every_catalog_reports_to_the_folder(tmp_path, jars):
    (jars / REPORTER_JAR).write_bytes(b"jar")
    conf = spark_config(_settings(tmp_path, {"dir": str(tmp_path / "r")}))
    assert str(jars / REPORTER_JAR) in conf["spark.jars"].split(",")
    for name in CATALOGS:
        assert conf[f"spark.sql.catalog.{name}.metrics-reporter-impl"] == REPORTER_CLASS
        assert conf[f"spark.sql.catalog.{name}.{DIR_PROPERTY}"] == (tmp_path / "r").as_uri()


def test_a_users_own_reporter_is_kept(tmp_path, jars, caplog):
    (jars / REPORTER_JAR).write_bytes(b"jar")
    theirs = {"spark.sql.catalog.b.metrics-reporter-impl": "com.example.Reporter"}
    conf = spark_config(_settings(tmp_path, {"dir": "s3://bucket/r"}, theirs))
    assert conf["spark.sql.catalog.a.metrics-reporter-impl"] == REPORTER_CLASS
    assert conf["spark.sql.catalog.a.icelake.scan-reports-dir"] == "s3://bucket/r"
    assert conf["spark.sql.catalog.b.metrics-reporter-impl"] == "com.example.Reporter"
    assert "spark.sql.catalog.b.icelake.scan-reports-dir" not in conf
    assert "catalog 'b'" in caplog.text and "not collected" in caplog.text


def test_off_no_reporter_but_a_built_jar_still_ships(tmp_path, jars):
    assert REPORTER_JAR not in spark_config(_settings(tmp_path)).get("spark.jars", "")
    (jars / REPORTER_JAR).write_bytes(b"jar")
    conf = spark_config(_settings(tmp_path))
    # Ready for a catalog registered later with reporting on (Iceberg loads it with its own loader).
    assert str(jars / REPORTER_JAR) in conf["spark.jars"]
    assert not any(k.endswith("metrics-reporter-impl") for k in conf)


def test_a_missing_jar_names_how_to_build_it(tmp_path, jars):
    with pytest.raises(SparkSetupError, match="reporter_jar") as err:
        spark_config(_settings(tmp_path, {"dir": str(tmp_path / "r")}))
    assert "scan_reports.dir" in str(err.value) and "openjdk-17-jdk-headless" in str(err.value)
    assert reporter_jar.built_reporter_jar() is None
