import os
import subprocess
import sys
from pathlib import Path

import pytest

from icelake_assets.policies import policy_for
from icelake_assets.settings import (
    CONFIG_ENV_VAR,
    DEFAULT_MODE,
    SettingsError,
    default_settings,
    load_settings,
)


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "icelake.yaml"
    path.write_text(text)
    return path


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


def test_unknown_catalog_lists_the_configured_ones(tmp_path):
    s = load_settings(write(tmp_path, "catalogs:\n  a: {type: sql, uri: 'sqlite:///x.db'}\n"))
    with pytest.raises(SettingsError, match=r"unknown catalog 'b' .*: a\)"):
        s.catalog_properties("b")


def test_iceberg_table_properties_override_thresholds_toward_keeping_more():
    s = default_settings(Path("/tmp"))
    policy = policy_for(
        s,
        {
            "write.target-file-size-bytes": "1048576",
            "history.expire.min-snapshots-to-keep": "9",
            "history.expire.max-snapshot-age-ms": str(200 * 3_600_000),
        },
    )
    assert policy.small_files.target_file_size_bytes == 1_048_576
    assert policy.snapshots.min_keep == 9
    assert policy.snapshots.max_age_hours == 200
    # Expiring sooner than the operator's 120 h is not the table's call.
    assert (
        policy_for(s, {"history.expire.max-snapshot-age-ms": str(2 * 3_600_000)}).snapshots.max_age_hours
        == 120
    )


def test_include_exclude_patterns(tmp_path):
    s = load_settings(
        write(tmp_path, "tables:\n  include: ['taxi.*', 'demo.sales.*']\n  exclude: ['*.tmp_*']\n")
    )
    assert s.selects("demo", "taxi", "trips")
    assert s.selects("demo", "sales", "orders")
    assert not s.selects("demo", "taxi", "tmp_x")
    assert not s.selects("demo", "events", "clicks")
    assert not s.selects("demo", "icelake", "audit_log")  # the product's own namespace


# ---------------------------------------------------------------- policies, secrets, pyiceberg config


@pytest.fixture(autouse=True)
def no_pyiceberg_config(tmp_path_factory, monkeypatch):
    """pyiceberg reads ~/.pyiceberg.yaml, $PYICEBERG_HOME, the working folder and PYICEBERG_* variables:
    every test starts with none of them."""
    empty = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(empty))
    monkeypatch.setenv("PYICEBERG_HOME", str(empty))
    monkeypatch.chdir(empty)
    for name in list(os.environ):
        if name.upper().startswith("PYICEBERG_") and name.upper() != "PYICEBERG_HOME":
            monkeypatch.delenv(name)
    return empty


CAT = "catalogs:\n  c1: {type: sql, uri: 'sqlite:///c.db'}\n"


@pytest.mark.parametrize(
    "text, expected",
    [
        (
            "thresholds: {mode: yolo}\n",
            r"thresholds\.mode: Input should be 'observe', 'propose' or 'enforce'",
        ),
        (
            "policies:\n  namespaces:\n    taxi: {mode: run}\n",
            r"policies\.namespaces\.taxi\.mode: Input should be 'observe', 'propose' or 'enforce'",
        ),
        (
            "policies:\n  tables:\n    'taxi.trips': {orphans: {older_than_hours: 12}}\n",
            r"policies\.tables\['taxi\.trips'\]\.orphans\.older_than_hours: .*at least 24 hours",
        ),
        (
            "thresholds:\n  operations: {enabled: [expire_snapshots, vacuum]}\n",
            r"operations\.enabled\[1\]: Input should be 'expire_snapshots', 'remove_orphan_files', "
            r"'rewrite_data_files' or 'rewrite_manifests'",
        ),
        ("thresholds:\n  small_files: {strategy: zorder}\n", r"small_files: .*zorder.* needs zorder_columns"),
        (
            "thresholds:\n  sensor: {interval_seconds: 5}\n",
            r"sensor\.interval_seconds: .*greater than or equal to 10",
        ),
        (
            "thresholds:\n  guards: {quiet_period_minutes: -1}\n",
            r"guards\.quiet_period_minutes: .*greater than or equal to 0",
        ),
        # Every numeric knob has an upper bound, in the file too: no way to switch a guard off.
        (
            "thresholds:\n  guards: {max_rewrite_bytes: 1000000000000000000}\n",
            r"guards\.max_rewrite_bytes: Input should be less than or equal to 1125899906842624",
        ),
        (
            "thresholds:\n  partitions: {max_retries: 1000000}\n",
            r"partitions\.max_retries: .*less than or equal to 10",
        ),
        (
            "thresholds:\n  sensor: {interval_seconds: 1000000}\n",
            r"sensor\.interval_seconds: .*less than or equal to 86400",
        ),
        (
            "policies:\n  namespaces:\n    taxi: {snapshots: {max_age_hours: 1e9}}\n",
            r"policies\.namespaces\.taxi\.snapshots\.max_age_hours: .*less than or equal to 87600",
        ),
        ("thresholds:\n  schedule: {cron: 'every night'}\n", r"schedule\.cron: .*not a 5-field cron"),
        (
            "thresholds:\n  schedule: {timezone: Mars/Olympus}\n",
            r"schedule\.timezone: .*not an IANA time zone",
        ),
        ("thresholds:\n  owners: [bob]\n", r"owners: .*e-mail addresses or 'team:<name>'"),
        ("thresholds:\n  tags: {tier: 'gold plated'}\n", r"tags: .*tag 'tier' value 'gold plated'"),
        (
            "thresholds:\n  configuration: {file_format: csv}\n",
            r"configuration\.file_format: Input should be 'parquet', 'orc' or 'avro'",
        ),
        (
            "thresholds:\n  small_files: {max_concurrent_file_group_rewrites: 0}\n",
            r"max_concurrent_file_group_rewrites",
        ),
        (
            "policies:\n  tables:\n    trips: {mode: observe}\n",
            r"table pattern 'trips' must be namespace\.table",
        ),
        (
            "policies:\n  catalogs:\n    c2: {mode: enforce}\n",
            r"policies\.catalogs\.c2: unknown catalog \(configured: c1\)",
        ),
        ("policies:\n  namespace: {}\n", r"policies\.namespace: unknown key"),
    ],
)
def test_bad_policies_name_file_key_and_allowed_values(tmp_path, text, expected):
    path = write(tmp_path, CAT + text)
    with pytest.raises(SettingsError, match=expected) as err:
        load_settings(path)
    assert str(path) in str(err.value)


def test_a_new_catalog_starts_in_propose_mode(tmp_path):
    s = load_settings(write(tmp_path, CAT))
    assert s.thresholds.mode == DEFAULT_MODE == "propose"
    assert policy_for(s, "c1.any.table").mode == "propose"


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


@pytest.mark.parametrize(
    "text, key",
    [
        (
            "catalogs:\n  c1: {type: rest, uri: 'http://x', credential: 'id:hunter2'}\n",
            r"catalogs\.c1\.credential",
        ),
        (
            "catalogs:\n  c1: {type: sql, uri: 'sqlite:///c.db', s3.secret-access-key: hunter2}\n",
            r"catalogs\.c1\['s3\.secret-access-key'\]",
        ),
        ("catalogs:\n  c1: {type: sql, uri: 'postgresql://u:hunter2@db/lake'}\n", r"catalogs\.c1\.uri"),
        ("catalogs:\n  c1: {type: rest, uri: 'http://x', token: '${T:-hunter2}'}\n", r"catalogs\.c1\.token"),
        (
            CAT + "spark:\n  config: {spark.hadoop.fs.s3a.secret.key: hunter2}\n",
            r"spark\.config\['spark\.hadoop",
        ),
        # Forms the old marker list missed (issue 10 item 6): unknown catalog keys mean secret, ...
        (
            "catalogs:\n  c1: {type: sql, uri: 'sqlite:///c.db', adls.connection-string: 'AccountKey=hunter2'}\n",
            r"catalogs\.c1\['adls\.connection-string'\]",
        ),
        (
            "catalogs:\n  c1: {type: rest, uri: 'http://x', header.X-Api-Key: hunter2}\n",
            r"catalogs\.c1\['header\.X-Api",
        ),
        (
            "catalogs:\n  c1: {type: rest, uri: 'http://x', vendor.opaque: hunter2}\n",
            r"catalogs\.c1\['vendor\.opaque'\]",
        ),
        # ... a password in a URI's query string, ...
        (
            "catalogs:\n  c1: {type: sql, uri: 'postgresql://db/lake?user=u&password=hunter2'}\n",
            r"catalogs\.c1\.uri",
        ),
        # ... and key-looking Spark settings.
        (
            CAT + "spark:\n  config: {spark.hadoop.fs.s3a.bucket.b.access.key: hunter2}\n",
            r"spark\.config\['spark\.hadoop",
        ),
        (
            CAT + "spark:\n  config: {spark.hadoop.fs.azure.account.key.a.dfs.core.windows.net: hunter2}\n",
            r"spark\.config\['spark\.hadoop\.fs\.azure",
        ),
    ],
)
def test_literal_secrets_are_refused_without_echoing_them(tmp_path, text, key):
    path = write(tmp_path, text)
    with pytest.raises(SettingsError, match=key + r".*literal secret is refused") as err:
        load_settings(path)
    assert "hunter2" not in str(err.value) and str(path) in str(err.value)
    if "s3.secret" in text:  # the pyiceberg way is suggested too
        assert "or set PYICEBERG_CATALOG__C1__S3__SECRET_ACCESS_KEY" in str(err.value)


def test_secrets_from_the_environment_never_print(tmp_path, monkeypatch):
    monkeypatch.setenv("PG_PASSWORD", "hunter2")
    monkeypatch.setenv("S3_SECRET", "s3cr3t-value")
    s = load_settings(
        write(
            tmp_path,
            "catalogs:\n  c1: {type: sql, uri: 'postgresql://u:${PG_PASSWORD}@db/lake', "
            "s3.secret-access-key: '${S3_SECRET}'}\n",
        )
    )
    props = s.catalog_properties("c1")  # the real values reach pyiceberg and Spark ...
    assert (
        props["uri"] == "postgresql://u:hunter2@db/lake" and props["s3.secret-access-key"] == "s3cr3t-value"
    )
    for text in (repr(s), str(s), str(s.redacted_catalog_properties("c1"))):  # ... and never a printout
        assert "hunter2" not in text and "s3cr3t-value" not in text
    assert s.redacted_catalog_properties("c1")["uri"] == "postgresql://u:***@db/lake"


def test_only_values_known_to_be_safe_print(tmp_path, monkeypatch):
    """Redaction by what is known to be safe: every form issue 10 found printed now prints as ***."""
    values = {
        "ADLS": "AccountKey=adls-hunter2",
        "HDR": "Bearer hdr-hunter2",
        "API": "api-hunter2",
        "PW": "pw-hunter2",
        "SIG": "sig-hunter2",
        "S3A": "s3a-hunter2",
        "OPAQUE": "opaque-hunter2",
    }
    for var, value in values.items():
        monkeypatch.setenv(var, value)
    s = load_settings(
        write(
            tmp_path,
            (
                "catalogs:\n  c1: {type: sql, uri: 'postgresql://u@db/lake?sslmode=require&password=${PW}', "
                "warehouse: 's3://b/wh', s3.region: eu-west-1, s3.endpoint: 'http://minio:9000/?X-Amz-Signature=${SIG}', "
                "adls.connection-string: '${ADLS}', header.Authorization: '${HDR}', header.X-Api-Key: '${API}', "
                "vendor.opaque: '${OPAQUE}'}\n"
                "spark:\n  config: {spark.hadoop.fs.s3a.bucket.b.access.key: '${S3A}', spark.executor.memory: 4g, "
                "spark.executor.extraJavaOptions: '-Dx=${OPAQUE}'}\n"
            ),
        )
    )
    shown = s.redacted_catalog_properties("c1")
    assert shown == {
        "type": "sql",
        "uri": "postgresql://u@db/lake?sslmode=***&password=***",
        "warehouse": "s3://b/wh",
        "s3.region": "eu-west-1",
        "s3.endpoint": "http://minio:9000/?X-Amz-Signature=***",
        "adls.connection-string": "***",
        "header.Authorization": "***",
        "header.X-Api-Key": "***",
        "vendor.opaque": "***",
    }
    text = repr(s) + str(s) + str(shown)
    assert "4g" in text and not [v for v in values.values() if v.split("=")[-1] in text]


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
        "c.create_namespace('taxi'); c.create_table('taxi.trips', schema=pa.schema([pa.field('id', pa.int64())]))"
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
