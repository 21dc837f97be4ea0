from pathlib import Path

import pytest

from icelake_assets.settings import CONFIG_ENV_VAR, SettingsError, default_settings, load_settings


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "icelake.yaml"
    path.write_text(text)
    return path


def test_relative_paths_resolve_against_the_settings_folder(tmp_path):
    s = load_settings(write(tmp_path, "catalogs:\n  c1: {type: sql, uri: 'sqlite:///lake/c.db', warehouse: lake/wh}\n"))
    props = s.catalog_properties("c1")
    assert props["uri"] == f"sqlite:///{tmp_path / 'lake' / 'c.db'}"
    assert props["warehouse"] == (tmp_path / "lake" / "wh").as_uri()
    assert s.source == str(tmp_path / "icelake.yaml")


def test_env_var_names_the_file(tmp_path, monkeypatch):
    path = write(tmp_path, "thresholds:\n  manifests: {max_count: 7}\n")
    monkeypatch.setenv(CONFIG_ENV_VAR, str(path))
    assert load_settings().thresholds.manifests.max_count == 7


def test_missing_file_named_by_env_var_is_an_error(tmp_path, monkeypatch):
    monkeypatch.setenv(CONFIG_ENV_VAR, str(tmp_path / "nope.yaml"))
    with pytest.raises(SettingsError, match="nope.yaml does not exist"):
        load_settings()


def test_no_file_gives_the_embedded_demo_lake(tmp_path, monkeypatch):
    monkeypatch.delenv(CONFIG_ENV_VAR, raising=False)
    monkeypatch.chdir(tmp_path)
    s = load_settings()
    assert s.catalog_properties("demo")["uri"] == f"sqlite:///{tmp_path / '.lake' / 'catalog.db'}"
    assert s == default_settings(tmp_path)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("thresholds:\n  snapshots: {max_count: lots}\n", r"thresholds\.snapshots\.max_count: .*integer.*'lots'"),
        ("thresholds:\n  snapshot: {max_count: 3}\n", r"thresholds\.snapshot: unknown key"),
        ("bogus: 1\n", r"bogus: unknown key"),
        ("thresholds:\n  small_files: {strategy: shuffle}\n", r"strategy: Input should be 'binpack' or 'sort'"),
        ("thresholds:\n  orphans: {older_than_hours: 2}\n", r"orphans\.older_than_hours: .*at least 24 hours"),
        ("catalogs: {}\n", r"at least one catalog"),
        ("catalogs:\n  c: [1, 2]\n", r"catalogs\.c: must be a mapping"),
        ("- a\n- b\n", r"top level must be a mapping"),
        ("a: [\n", r"not valid YAML"),
    ],
)
def test_bad_settings_name_file_key_and_cause(tmp_path, text, expected):
    path = write(tmp_path, text)
    with pytest.raises(SettingsError, match=expected) as err:
        load_settings(path)
    assert str(path) in str(err.value)


def test_unknown_catalog_lists_the_configured_ones(tmp_path):
    s = load_settings(write(tmp_path, "catalogs:\n  a: {type: sql, uri: 'sqlite:///x.db'}\n"))
    with pytest.raises(SettingsError, match=r"unknown catalog 'b' .*: a\)"):
        s.catalog_properties("b")


def test_table_properties_override_thresholds():
    s = default_settings(Path("/tmp"))
    policy = s.policy_for({"write.target-file-size-bytes": "1048576", "history.expire.min-snapshots-to-keep": "9",
                           "history.expire.max-snapshot-age-ms": str(2 * 3_600_000)})
    assert policy.small_files.target_file_size_bytes == 1_048_576
    assert policy.snapshots.min_keep == 9
    assert policy.snapshots.max_age_hours == 2


def test_include_exclude_patterns(tmp_path):
    s = load_settings(write(tmp_path, "tables:\n  include: ['taxi.*', 'demo.sales.*']\n  exclude: ['*.tmp_*']\n"))
    assert s.selects("demo", "taxi", "trips")
    assert s.selects("demo", "sales", "orders")
    assert not s.selects("demo", "taxi", "tmp_x")
    assert not s.selects("demo", "events", "clicks")
    assert not s.selects("demo", "icelake", "audit_log")  # the product's own namespace
