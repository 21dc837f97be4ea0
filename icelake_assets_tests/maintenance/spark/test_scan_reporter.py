"""The scan reporter in real Spark, configured by the product's spark_config: a filtered SELECT on an
Iceberg table of a SQLite catalog writes one ScanReportParser JSON file per scan, which the parser
reads and the ingest loads; and the jar builds from the shipped source."""

import json
import zipfile

from icelake_assets.audit.scan_reports import ScanReportStore, ingest_dir
from icelake_assets.catalog.connection import open_catalog
from icelake_assets.layout.reports import parse_scan_report
from icelake_assets.maintenance.spark import reporter_jar
from icelake_assets.maintenance.spark.session import spark_config


def test_a_filtered_select_writes_a_report_that_parses_and_is_ingested(make_lake, tmp_path, spark_for):
    folder = tmp_path / "scan-reports"
    settings = make_lake(extra={"scan_reports": {"dir": str(folder)}})
    name = next(iter(settings.catalogs))
    assert reporter_jar.REPORTER_JAR in spark_config(settings)["spark.jars"]
    open_catalog(settings, name, create=True)
    spark = spark_for(settings)
    table = f"`{name}`.db.events"
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS `{name}`.db")
    spark.sql(f"CREATE TABLE {table} (id bigint, country string) USING iceberg")
    for start in range(0, 40, 10):  # four files with disjoint id ranges
        values = ", ".join(f"({i}, 'c{i % 3}')" for i in range(start, start + 10))
        spark.sql(f"INSERT INTO {table} VALUES {values}")
    assert not list(folder.rglob("*.json"))  # writes plan no scan

    assert spark.sql(f"SELECT id, country FROM {table} WHERE id = 15").collect()[0].id == 15

    files = sorted(folder.rglob("*.json"))
    assert files and all(f.parent.name.isdigit() and len(f.parent.name) == 8 for f in files)
    assert not [f for f in folder.rglob(".*")]  # no temp or checksum file left beside them
    reports = [parse_scan_report(f.read_text()) for f in files]
    ours = [r for r in reports if r.table_name.endswith("db.events") and r.filter is not True]
    assert ours, [r.table_name for r in reports]
    report = ours[0]
    assert name in report.table_name
    # Only the files whose id bounds hold 15 are read (each INSERT may write more than one file).
    assert report.result_data_files >= 1 and report.skipped_data_files >= 3
    assert report.skipped_data_files > report.result_data_files
    # Iceberg sanitizes the literal: the column and operator arrive, not the value.
    assert "id" in json.dumps(report.filter) and "15" not in json.dumps(report.filter)

    result = ingest_dir(settings)
    assert result.reports == len(files) and not list(folder.rglob("*.json"))
    table_rows = ScanReportStore.from_settings(settings).table(create=False).scan().to_arrow()
    assert report.skipped_data_files in table_rows["skipped_data_files"].to_pylist()


def test_the_jar_builds_from_the_shipped_source_only_when_it_changed(tmp_path, monkeypatch):
    monkeypatch.setenv("ICELAKE_JARS_DIR", str(tmp_path))
    jar = reporter_jar.build()
    assert jar == tmp_path / reporter_jar.REPORTER_JAR
    with zipfile.ZipFile(jar) as archive:
        assert "io/icelake/reports/IcelakeScanReportWriter.class" in archive.namelist()
    built = jar.stat().st_mtime_ns
    assert reporter_jar.build().stat().st_mtime_ns == built  # newer than its source: not rebuilt
    assert not [p for p in tmp_path.iterdir() if p.name != jar.name]  # no partial jar left
