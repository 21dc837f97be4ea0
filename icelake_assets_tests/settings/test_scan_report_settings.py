"""scan_reports: off by default, a local folder (relative to the settings file) or an s3:// URI, an
internal table, a configured catalog."""

import pytest

from icelake_assets.settings import SettingsError, load_settings, parse_settings

CATALOGS = {
    "lake": {"type": "sql", "uri": "sqlite:///x.db"},
    "other": {"type": "sql", "uri": "sqlite:///y.db"},
}


def _settings(tmp_path, section):
    return parse_settings({"catalogs": CATALOGS, "scan_reports": section}, str(tmp_path / "i.yaml"), tmp_path)


def test_off_by_default_and_in_the_audit_catalog(tmp_path):
    settings = parse_settings({"catalogs": CATALOGS, "audit": {"catalog": "other"}}, "x.yaml", tmp_path)
    assert settings.scan_reports.dir is None and settings.scan_reports.uri is None
    assert settings.scan_reports.table == "icelake.scan_reports"
    assert settings.scan_reports.interval_seconds == 60
    assert settings.scan_reports_catalog() == "other"


def test_a_relative_folder_is_the_settings_files_neighbour(tmp_path):
    path = tmp_path / "icelake.yaml"
    path.write_text(
        "catalogs: {lake: {type: sql, uri: 'sqlite:///x.db'}}\nscan_reports: {dir: reports, catalog: lake}\n"
    )
    settings = load_settings(path)
    assert settings.scan_reports.dir == str(tmp_path / "reports")
    assert settings.scan_reports.uri == (tmp_path / "reports").as_uri()
    assert settings.scan_reports_catalog() == "lake"


def test_object_storage_uris_are_kept_as_written(tmp_path):
    settings = _settings(tmp_path, {"dir": "s3a://bucket/scan-reports"})
    assert settings.scan_reports.uri == "s3a://bucket/scan-reports"


@pytest.mark.parametrize(
    ("section", "cause"),
    [
        ({"dir": "hdfs://nn/reports"}, "a local folder or a URI of"),
        ({"dir": "s3://"}, "names no bucket"),
        ({"dir": "  "}, "a local folder"),
        ({"table": "lake.scan_reports"}, "'icelake' namespace"),
        ({"catalog": "nope"}, "scan_reports.catalog: unknown catalog 'nope'"),
        ({"interval_seconds": 1}, "interval_seconds"),
        ({"dirs": "/x"}, "dirs"),
    ],
)
def test_bad_values_are_refused_naming_the_key(tmp_path, section, cause):
    with pytest.raises(SettingsError, match="scan_reports") as err:
        _settings(tmp_path, section)
    assert cause in str(err.value)
