"""Loading: where the file comes from, ${VAR} interpolation, pyiceberg's configuration, relative paths,
errors that name the file, the key and the cause."""

import os
import subprocess
import sys

import pytest

from icelake_assets.settings import (
    CONFIG_ENV_VAR,
    SettingsError,
    default_settings,
    load_settings,
)
from icelake_assets_tests.settings.conftest import write


def test_relative_paths_resolve_against_the_settings_folder(tmp_path):
    s = load_settings(
        write(tmp_path, "catalogs:\n  c1: {type: sql, uri: 'sqlite:///lake/c.db', warehouse: lake/wh}\n")
    )
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
        (
            "thresholds:\n  snapshots: {max_count: lots}\n",
            r"thresholds\.snapshots\.max_count: .*integer.*'lots'",
        ),
        ("thresholds:\n  snapshot: {max_count: 3}\n", r"thresholds\.snapshot: unknown key"),
        ("bogus: 1\n", r"bogus: unknown key"),
        (
            "thresholds:\n  small_files: {strategy: shuffle}\n",
            r"strategy: Input should be 'binpack', 'sort' or 'zorder'",
        ),
        (
            "thresholds:\n  orphans: {older_than_hours: 2}\n",
            r"orphans\.older_than_hours: .*at least 24 hours",
        ),
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


def test_env_references_are_interpolated(tmp_path, monkeypatch):
    monkeypatch.setenv("LAKE_DB", "lake.db")
    monkeypatch.setenv("OWNER", "team:data")
    s = load_settings(
        write(
            tmp_path,
            "catalogs:\n  c1: {type: sql, uri: 'sqlite:///${LAKE_DB}', warehouse: '${WH:-wh}'}\n"
            "thresholds: {owners: ['${OWNER}']}\n",
        )
    )
    assert s.catalog_properties("c1")["uri"] == f"sqlite:///{tmp_path / 'lake.db'}"
    assert s.catalog_properties("c1")["warehouse"] == (tmp_path / "wh").as_uri()
    assert s.thresholds.owners == ("team:data",)


def test_a_missing_env_reference_names_the_key_and_the_variable(tmp_path, monkeypatch):
    monkeypatch.delenv("NOPE_TOKEN", raising=False)
    path = write(tmp_path, "catalogs:\n  c1: {type: rest, uri: 'http://x', token: '${NOPE_TOKEN}'}\n")
    with pytest.raises(
        SettingsError, match=r"catalogs\.c1\.token: environment variable NOPE_TOKEN is not set"
    ):
        load_settings(path)


def test_validation_errors_redact_secrets(tmp_path, monkeypatch):
    monkeypatch.setenv("S3_SECRET", "s3cr3t-value")
    path = write(tmp_path, "catalogs:\n  c1: {warehouse: wh, s3.secret-access-key: '${S3_SECRET}'}\n")
    with pytest.raises(SettingsError, match=r"catalog 'c1' needs a 'type'") as err:
        load_settings(path)
    assert "s3cr3t-value" not in str(err.value) and "***" in str(err.value)


def _sqlite_env(monkeypatch, tmp_path, name="prod"):
    """A catalog configured the pyiceberg way only: PYICEBERG_CATALOG__<NAME>__<KEY> variables."""
    (tmp_path / "wh").mkdir(exist_ok=True)
    monkeypatch.setenv(f"PYICEBERG_CATALOG__{name.upper()}__TYPE", "sql")
    monkeypatch.setenv(f"PYICEBERG_CATALOG__{name.upper()}__URI", f"sqlite:///{tmp_path / 'py.db'}")
    monkeypatch.setenv(f"PYICEBERG_CATALOG__{name.upper()}__WAREHOUSE", (tmp_path / "wh").as_uri())
    monkeypatch.setenv(f"PYICEBERG_CATALOG__{name.upper()}__INIT_CATALOG_TABLES", "true")


def test_pyiceberg_environment_variables_configure_the_lake_exactly_as_pyiceberg_reads_them(
    tmp_path, monkeypatch
):
    from pyiceberg.utils.config import Config

    from icelake_assets.catalog.connection import open_catalog
    from icelake_assets.catalog.discovery import discover_tables

    _sqlite_env(monkeypatch, tmp_path)
    # An existing pyiceberg user's program (a new process: pyiceberg reads its variables at import).
    user = (
        "from pyiceberg.catalog import load_catalog; import pyarrow as pa; c = load_catalog('prod'); "
        "c.create_namespace('taxi'); "
        "c.create_table('taxi.trips', schema=pa.schema([pa.field('id', pa.int64())]))"
    )
    subprocess.run([sys.executable, "-c", user], check=True, env=dict(os.environ), timeout=120)
    s = load_settings()  # no icelake.yaml at all
    assert s.source == "<pyiceberg configuration>"
    assert s.catalog_properties("prod") == dict(Config().get_catalog_config("prod"))
    assert s.catalog_properties("prod")["init-catalog-tables"] == "true"
    assert [str(t.ref) for t in discover_tables(s)] == ["prod.taxi.trips"]
    assert open_catalog(s, "prod").load_table("taxi.trips").name() == ("taxi", "trips")


def test_pyiceberg_yaml_is_merged_under_the_settings_file(tmp_path, monkeypatch, no_pyiceberg_config):
    (no_pyiceberg_config / ".pyiceberg.yaml").write_text(
        "catalog:\n  prod:\n    type: rest\n    uri: http://catalog:8181\n    warehouse: wh_from_pyiceberg\n"
        "  other:\n    type: rest\n    uri: http://other\n"
    )
    monkeypatch.setenv("PYICEBERG_CATALOG__PROD__TOKEN", "tok-value")  # secrets: the environment
    s = load_settings(write(tmp_path, "catalogs:\n  prod:\n    warehouse: s3://bucket/wh\n"))
    assert s.catalog_properties("prod") == {
        "type": "rest",
        "uri": "http://catalog:8181",
        "token": "tok-value",
        "warehouse": "s3://bucket/wh",
    }  # the file wins per key
    assert list(s.catalogs) == ["prod"]  # a file that lists catalogs maintains only those
    assert "tok-value" not in repr(s)
    everything = load_settings(write(tmp_path, "tables: {exclude: []}\n"))
    assert sorted(everything.catalogs) == ["other", "prod"]


def test_a_catalog_named_only_in_the_file_can_come_whole_from_pyiceberg(tmp_path, monkeypatch):
    _sqlite_env(monkeypatch, tmp_path)
    s = load_settings(write(tmp_path, "catalogs:\n  prod:\n"))
    assert s.catalog_properties("prod")["uri"] == f"sqlite:///{tmp_path / 'py.db'}"
