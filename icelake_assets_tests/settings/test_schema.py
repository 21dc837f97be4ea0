"""The schema: policy and settings models refuse what they cannot use, and answer what they hold."""

import pytest

from icelake_assets.policies import policy_for
from icelake_assets.settings import DEFAULT_MODE, SettingsError, load_settings
from icelake_assets.types import TableRef
from icelake_assets_tests.settings.conftest import CAT, write


def test_unknown_catalog_lists_the_configured_ones(tmp_path):
    s = load_settings(write(tmp_path, "catalogs:\n  a: {type: sql, uri: 'sqlite:///x.db'}\n"))
    with pytest.raises(SettingsError, match=r"unknown catalog 'b' .*: a\)"):
        s.catalog_properties("b")


def test_include_exclude_patterns(tmp_path):
    s = load_settings(
        write(tmp_path, "tables:\n  include: ['taxi.*', 'demo.sales.*']\n  exclude: ['*.tmp_*']\n")
    )
    assert s.selects("demo", "taxi", "trips")
    assert s.selects("demo", "sales", "orders")
    assert not s.selects("demo", "taxi", "tmp_x")
    assert not s.selects("demo", "events", "clicks")
    assert not s.selects("demo", "icelake", "audit_log")  # the product's own namespace


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
            r"operations\.enabled\[1\]: Input should be 'manage_restore_points', 'expire_data', 'expire_snapshots', "
            r"'remove_orphan_files', "
            r"'rewrite_data_files', 'rewrite_manifests' or 'compute_statistics'",
        ),
        (
            "thresholds:\n  statistics: {columns: some}\n",
            r"statistics\.columns.*Input should be 'all' or 'keys'",
        ),
        ("thresholds:\n  statistics: {columns: []}\n", r"statistics\.columns: .*at least one column"),
        ("thresholds:\n  statistics: {max_stale_ratio: 0}\n", r"statistics\.max_stale_ratio"),
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
    assert policy_for(s, TableRef.parse("c1.any.table")).mode == "propose"


def test_auto_checks_carry_every_check_up_to_the_bound_and_the_summary_past_it(tmp_path):
    auto = load_settings(write(tmp_path, CAT + "automation: {checks_each_max_tables: 100}\n")).automation
    assert auto.checks_per_table == "auto"  # the default
    assert [auto.checks_for(n) for n in (0, 100, 101, 10_000)] == ["each", "each", "summary", "summary"]
    pinned = load_settings(write(tmp_path, CAT + "automation: {checks_per_table: each}\n")).automation
    assert pinned.checks_for(10_000) == "each"
    with pytest.raises(SettingsError, match="checks_per_table"):
        load_settings(write(tmp_path, CAT + "automation: {checks_per_table: some}\n"))


def test_partition_checks_takes_auto_on_off_even_as_yaml_booleans_and_names_a_bad_value(tmp_path):
    assert load_settings(write(tmp_path, CAT)).automation.partition_checks == "auto"  # the default
    # A bare on / off is a YAML boolean: read as the switch it spells.
    for text, expected in (("on", "on"), ("off", "off"), ("'off'", "off"), ("auto", "auto")):
        loaded = load_settings(write(tmp_path, CAT + f"automation: {{partition_checks: {text}}}\n"))
        assert loaded.automation.partition_checks == expected
    with pytest.raises(SettingsError, match=r"partition_checks.*'sometimes' is not one of auto, on, off"):
        load_settings(write(tmp_path, CAT + "automation: {partition_checks: sometimes}\n"))
