"""Policy resolution: precedence, patterns, sources, table properties, unsafe values, modes,
configuration policies."""

from pathlib import Path
from typing import Any

import pytest

from icelake_assets.catalog.connection import TableRef
from icelake_assets.planning.manifests import decide_manifests
from icelake_assets.planning.orphans import decide_orphans
from icelake_assets.planning.rewrite import decide_rewrite, rewrite_options
from icelake_assets.planning.snapshots import decide_expire
from icelake_assets.policies import (
    PolicyError,
    configuration_violations,
    decide_action,
    policy_for,
    resolve_policy,
)
from icelake_assets.settings import (
    OPERATIONS,
    ConfigurationPolicy,
    Settings,
    SettingsError,
    default_settings,
    parse_settings,
)

TRIPS = "c1.taxi.trips"


def settings(extra: dict[str, Any] | None = None, uri: str = "sqlite:///c.db") -> Settings:
    data = {
        "catalogs": {"c1": {"type": "sql", "uri": uri}, "c2": {"type": "sql", "uri": uri}},
        **(extra or {}),
    }
    return parse_settings(data, "/etc/lake/icelake.yaml", Path("/tmp"))


# Every layer that can set snapshots.min_keep, lowest precedence first: (file section, properties, source).
LAYERS: list[tuple[dict[str, Any], dict[str, str], str]] = [
    ({}, {}, "default"),
    ({"thresholds": {"snapshots": {"min_keep": 6}}}, {}, "icelake.yaml thresholds.snapshots.min_keep"),
    (
        {"policies": {"defaults": {"snapshots": {"min_keep": 7}}}},
        {},
        "icelake.yaml policies.defaults.snapshots.min_keep",
    ),
    (
        {"policies": {"catalogs": {"c1": {"snapshots": {"min_keep": 8}}}}},
        {},
        "icelake.yaml policies.catalogs['c1'].snapshots.min_keep",
    ),
    (
        {"policies": {"namespaces": {"taxi": {"snapshots": {"min_keep": 9}}}}},
        {},
        "icelake.yaml policies.namespaces['taxi'].snapshots.min_keep",
    ),
    (
        {"policies": {"tables": {"taxi.trips": {"snapshots": {"min_keep": 10}}}}},
        {},
        "icelake.yaml policies.tables['taxi.trips'].snapshots.min_keep",
    ),
    (
        {},
        {"history.expire.min-snapshots-to-keep": "11"},
        "table property history.expire.min-snapshots-to-keep",
    ),
    ({}, {"icelake.snapshots.min_keep": "12"}, "table property icelake.snapshots.min_keep"),
]


def _merge(a: dict, b: dict) -> dict:
    out = dict(a)
    for k, v in b.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


@pytest.mark.parametrize("top", range(len(LAYERS)))
def test_precedence_the_most_specific_layer_wins(top):
    data: dict = {}
    props: dict[str, str] = {}
    for section, p, _ in LAYERS[: top + 1]:
        data = _merge(data, section)
        props.update(p)
    eff = resolve_policy(settings(data), TRIPS, props)
    assert eff.policy.snapshots.min_keep == [5, 6, 7, 8, 9, 10, 11, 12][top]
    assert eff.source_of("snapshots.min_keep") == LAYERS[top][2]


def test_layers_only_override_the_keys_they_set():
    s = settings(
        {
            "thresholds": {"snapshots": {"max_count": 40}},
            "policies": {
                "catalogs": {"c1": {"mode": "enforce"}},
                "namespaces": {
                    "taxi": {"snapshots": {"min_keep": 9}, "tags": {"tier": "gold"}, "owners": ["team:taxi"]}
                },
                "tables": {"taxi.trips": {"tags": {"pii": "no"}, "owners": ["ana@example.com"]}},
            },
        }
    )
    eff = resolve_policy(s, TRIPS)
    p = eff.policy
    assert (p.mode, p.snapshots.max_count, p.snapshots.min_keep, p.snapshots.max_age_hours) == (
        "enforce",
        40,
        9,
        120,
    )
    assert p.tags == {"tier": "gold", "pii": "no"}  # mappings merge key by key
    assert p.owners == ("ana@example.com",)  # lists are replaced whole
    assert eff.source_of("tags.tier") == "icelake.yaml policies.namespaces['taxi'].tags.tier"
    assert eff.source_of("snapshots.max_age_hours") == "default"
    # Another catalog, namespace and table see none of it.
    other = resolve_policy(s, "c2.events.clicks")
    assert (other.mode, other.policy.snapshots.min_keep, other.policy.tags) == ("propose", 5, {})
    assert other.source_of("mode") == "default"


def test_more_literal_patterns_win_and_ties_go_to_the_later_entry():
    s = settings(
        {
            "policies": {
                "namespaces": {
                    "c1.taxi": {"snapshots": {"min_keep": 3}},  # most literal characters
                    "taxi": {"snapshots": {"min_keep": 2}, "manifests": {"max_count": 7}},
                    "t*": {"snapshots": {"min_keep": 1}, "manifests": {"max_count": 8}, "mode": "observe"},
                },
                "tables": {
                    "*.trips": {"manifests": {"max_count": 11}},
                    "taxi.t*": {"manifests": {"max_count": 12}},
                },
            }
        }
    )
    eff = resolve_policy(s, TRIPS)
    assert eff.policy.snapshots.min_keep == 3
    assert (
        eff.source_of("snapshots.min_keep")
        == "icelake.yaml policies.namespaces['c1.taxi'].snapshots.min_keep"
    )
    assert eff.policy.mode == "observe"  # only the wildcard entry sets it: inherited as is
    assert (
        eff.policy.manifests.max_count == 12
    )  # '*.trips' and 'taxi.t*' tie (6 literal characters): the later wins
    swapped = settings(
        {
            "policies": {
                "tables": {
                    "taxi.t*": {"manifests": {"max_count": 12}},
                    "*.trips": {"manifests": {"max_count": 11}},
                }
            }
        }
    )
    assert resolve_policy(swapped, TRIPS).policy.manifests.max_count == 11
    assert resolve_policy(s, "c1.tolls.daily").policy.snapshots.min_keep == 1  # only 't*' matches
    assert resolve_policy(s, "c2.taxi.trips").policy.snapshots.min_keep == 2  # 'c1.taxi' is for c1 only


def test_allowlisted_table_properties_tighten_the_policy():
    s = settings({"thresholds": {"owners": ["team:ops"], "tags": {"tier": "gold"}}})
    props = {
        "icelake.owners": "team:data, ana@example.com",
        "icelake.tags.pii": "no",
        "icelake.snapshots.min_keep": "8",
        "icelake.snapshots.max_count": "300",
        "icelake.orphans.older_than_hours": "200",
        "icelake.guards.max_rewrite_bytes": str(1024**3),
        "icelake.guards.quiet_period_minutes": "60",
        "icelake.manifests.max_count": "80",
        "write.target-file-size-bytes": str(64 * 1024 * 1024),
        "history.expire.max-snapshot-age-ms": str(240 * 3_600_000),
    }
    eff = resolve_policy(s, TRIPS, props)
    p = eff.policy
    assert eff.problems == ()
    assert p.owners == ("team:ops", "team:data", "ana@example.com")  # added to the operator's owners
    assert p.tags == {"tier": "gold", "pii": "no"} and eff.asset_tags() == {
        **p.tags,
        "icelake/mode": "propose",
    }
    assert (p.snapshots.min_keep, p.snapshots.max_count, p.snapshots.max_age_hours) == (8, 300, 240)
    assert (p.orphans.older_than_hours, p.manifests.max_count) == (200, 80)
    assert (p.guards.max_rewrite_bytes, p.guards.quiet_period_minutes) == (1024**3, 60)
    assert p.small_files.target_file_size_bytes == 64 * 1024 * 1024  # bounded, either way
    assert eff.source_of("owners") == "icelake.yaml thresholds.owners + table property icelake.owners"
    assert eff.source_of("snapshots.max_age_hours") == "table property history.expire.max-snapshot-age-ms"


# The exploits of issue 10 item 2: anyone who can set a table property overruled the operator.
EXPLOITS = [
    ({"icelake.mode": "enforce"}, "mode", "propose", "only the settings file sets the mode"),
    (
        {"icelake.operations.enabled": ",".join(OPERATIONS)},
        "operations.enabled",
        ("expire_snapshots",),
        "only the settings file enables operations",
    ),
    (
        {"icelake.guards.quiet_period_minutes": "0"},
        "guards.quiet_period_minutes",
        30.0,
        "a table property may only raise guards.quiet_period_minutes (it keeps 30.0 from icelake.yaml "
        "policies.catalogs['c1'].guards.quiet_period_minutes)",
    ),
    (
        {"icelake.guards.max_rewrite_bytes": str(10**18)},
        "guards.max_rewrite_bytes",
        100 * 1024**3,
        "guards.max_rewrite_bytes: Input should be less than or equal to 1125899906842624",
    ),
    (
        {"icelake.partitions.max_retries": "1000000"},
        "partitions.max_retries",
        2,
        "only the settings file sets partitioned runs and their retries",
    ),
    (
        {"icelake.sensor.interval_seconds": "30"},
        "sensor.interval_seconds",
        300,
        "only the settings file sets the sensor interval",
    ),
]


@pytest.mark.parametrize("props, key, kept, reason", EXPLOITS, ids=[e[1] for e in EXPLOITS])
def test_a_table_property_cannot_loosen_the_operators_policy(props, key, kept, reason):
    s = settings(
        {
            "policies": {
                "catalogs": {
                    "c1": {
                        "mode": "propose",
                        "guards": {"quiet_period_minutes": 30},
                        "operations": {"enabled": ["expire_snapshots"]},
                    }
                }
            }
        }
    )
    eff = resolve_policy(s, TRIPS, props)
    assert eff.value_of(key) == kept and eff.source_of(key) != f"table property {next(iter(props))}"
    assert eff.problems == (
        f"table property {next(iter(props))}={next(iter(props.values()))!r} ignored: {reason}"
        + ("" if key != "sensor.interval_seconds" else " (one interval for the whole lake)"),
    )


def test_table_properties_move_only_toward_safety():
    s = settings(
        {
            "thresholds": {
                "snapshots": {"min_keep": 6},
                "orphans": {"older_than_hours": 96},
                "tags": {"tier": "gold"},
            }
        }
    )
    props = {
        "history.expire.min-snapshots-to-keep": "10",
        "icelake.snapshots.min_keep": "7",  # under 10
        "history.expire.max-snapshot-age-ms": "3600000",
        "icelake.orphans.older_than_hours": "48",
        "icelake.snapshots.max_count": "3",
        "icelake.manifests.max_count": str(10**9),  # over the bound
        "icelake.small_files.strategy": "sort",
        "icelake.configuration.min_format_version": "1",
        "icelake.tags.tier": "bronze",
        "write.target-file-size-bytes": str(10**12),
        "icelake.guards.max_rewrite_bytes": str(1024**4),
    }
    eff = resolve_policy(s, TRIPS, props)
    p = eff.policy
    assert p.snapshots.min_keep == 10 and eff.source_of("snapshots.min_keep").endswith(
        "min-snapshots-to-keep"
    )
    assert (p.snapshots.max_age_hours, p.orphans.older_than_hours, p.snapshots.max_count) == (120, 96, 100)
    assert (p.manifests.max_count, p.small_files.strategy, p.tags) == (50, "binpack", {"tier": "gold"})
    assert p.small_files.target_file_size_bytes == 128 * 1024 * 1024
    problems = "\n".join(eff.problems)
    for expected in [
        "icelake.snapshots.min_keep='7' ignored: a table property may only raise snapshots.min_keep (it keeps 10 "
        "from table property history.expire.min-snapshots-to-keep)",
        "history.expire.max-snapshot-age-ms='3600000' ignored: a table property may only raise snapshots.max_age_hours",
        "icelake.orphans.older_than_hours='48' ignored: a table property may only raise orphans.older_than_hours "
        "(it keeps 96.0 from icelake.yaml thresholds.orphans.older_than_hours)",
        "icelake.snapshots.max_count='3' ignored: a table property may only raise snapshots.max_count",
        "icelake.manifests.max_count='1000000000' ignored: manifests.max_count: Input should be less than or equal",
        "icelake.small_files.strategy='sort' ignored: only the settings file sets small_files.strategy",
        "icelake.configuration.min_format_version='1' ignored: only the settings file sets what tables must carry",
        "icelake.tags.tier='bronze' ignored: tags.tier is set by icelake.yaml thresholds.tags.tier",
        "write.target-file-size-bytes='1000000000000' ignored: small_files.target_file_size_bytes: Input should be "
        "less than or equal to 17179869184",
        "icelake.guards.max_rewrite_bytes='1099511627776' ignored: a table property may only lower "
        "guards.max_rewrite_bytes (it keeps 107374182400 from the built-in default)",
    ]:
        assert expected in problems
    assert len(eff.problems) == 10 and p.guards.max_rewrite_bytes == 100 * 1024**3


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


def test_unsafe_or_invalid_table_properties_are_ignored_and_reported():
    props = {
        "icelake.orphans.older_than_hours": "2",
        "icelake.mode": "yolo",
        "icelake.snapshot.max_count": "3",
        "history.expire.min-snapshots-to-keep": "many",
        "icelake.snapshots.max_count": "300",
    }
    eff = resolve_policy(settings({"thresholds": {"orphans": {"older_than_hours": 96}}}), TRIPS, props)
    assert eff.policy.orphans.older_than_hours == 96  # the unsafe 2 h is refused, the file's value stays
    assert eff.source_of("orphans.older_than_hours") == "icelake.yaml thresholds.orphans.older_than_hours"
    assert (eff.policy.mode, eff.policy.snapshots.min_keep) == ("propose", 5)
    assert eff.policy.snapshots.max_count == 300  # valid properties still apply
    problems = "\n".join(eff.problems)
    assert (
        "icelake.orphans.older_than_hours='2' ignored: orphans.older_than_hours: must be at least 24 hours"
        in problems
    )
    assert "icelake.mode='yolo' ignored: only the settings file sets the mode" in problems
    assert (
        "icelake.snapshot.max_count ignored: unknown policy key (a table property may set icelake.snapshots."
        in problems
    )
    assert "history.expire.min-snapshots-to-keep='many' ignored: not a number" in problems
    assert len(eff.problems) == 4


def test_unsafe_values_in_the_file_are_refused_with_their_source():
    with pytest.raises(
        SettingsError, match=r"policies\.namespaces\.taxi\.orphans\.older_than_hours: .*24 hours"
    ):
        settings({"policies": {"namespaces": {"taxi": {"orphans": {"older_than_hours": 1}}}}})
    # Concurrent group rewrites race on a one-writer SQLite catalog: refused, naming where it was set.
    s = settings(
        {"policies": {"tables": {"taxi.trips": {"small_files": {"max_concurrent_file_group_rewrites": 4}}}}}
    )
    with pytest.raises(
        PolicyError,
        match=r"invalid policy for c1\.taxi\.trips in /etc/lake/icelake\.yaml: "
        r"small_files\.max_concurrent_file_group_rewrites: must be 1 on a SQLite",
    ):
        resolve_policy(s, TRIPS)
    assert resolve_policy(s, "c1.events.clicks").policy.small_files.max_concurrent_file_group_rewrites == 1
    pg = settings(
        {"policies": {"tables": {"taxi.trips": {"small_files": {"max_concurrent_file_group_rewrites": 4}}}}},
        uri="postgresql://u@db/lake",
    )
    assert resolve_policy(pg, TRIPS).policy.small_files.max_concurrent_file_group_rewrites == 4
    # Layers that combine into something invalid name every source involved.
    bad = settings(
        {
            "policies": {
                "namespaces": {"taxi": {"small_files": {"strategy": "zorder", "zorder_columns": ["a"]}}},
                "tables": {"taxi.trips": {"small_files": {"zorder_columns": []}}},
            }
        }
    )
    with pytest.raises(
        PolicyError,
        match=r"small_files: strategy 'zorder' needs zorder_columns .*\(from .*"
        r"policies\.namespaces\['taxi'\]\.small_files\.strategy",
    ):
        resolve_policy(bad, TRIPS)


def test_policy_for_accepts_names_refs_and_the_old_properties_form():
    s = settings({"policies": {"namespaces": {"taxi": {"manifests": {"max_count": 9}}}}})
    assert policy_for(s, TRIPS).manifests.max_count == 9
    assert policy_for(s, "taxi.trips").manifests.max_count == 9  # the first catalog by default
    assert (
        policy_for(
            s, TableRef("c1", ("taxi",), "trips"), {"icelake.manifests.max_count": "14"}
        ).manifests.max_count
        == 14
    )
    assert (
        policy_for(s, {"icelake.manifests.max_count": "60"}).manifests.max_count == 60
    )  # no table: no layers
    assert policy_for(s).manifests.max_count == 50
    with pytest.raises(KeyError, match="not a policy key"):
        resolve_policy(s, TRIPS).source_of("snapshots.min_kept")


@pytest.mark.parametrize(
    "mode, wants, action",
    [
        ("observe", True, "nothing"),
        ("observe", False, "nothing"),
        ("propose", True, "record"),
        ("propose", False, "nothing"),
        ("enforce", True, "launch"),
        ("enforce", False, "nothing"),
    ],
)
def test_each_mode_decides_what_a_sensor_tick_does(mode, wants, action):
    assert decide_action(mode, wants) == action


def test_decide_action_refuses_an_unknown_mode():
    with pytest.raises(ValueError, match="unknown mode 'run': expected 'observe', 'propose' or 'enforce'"):
        decide_action("run", True)  # type: ignore[arg-type]


def test_modes_per_scope_drive_decide_action():
    s = settings(
        {"policies": {"catalogs": {"c1": {"mode": "observe"}}, "namespaces": {"taxi": {"mode": "enforce"}}}}
    )
    assert decide_action(policy_for(s, "c1.events.clicks").mode, True) == "nothing"
    assert decide_action(policy_for(s, TRIPS).mode, True) == "launch"
    assert decide_action(policy_for(s, "c2.events.clicks").mode, True) == "record"  # unconfigured: propose


def test_disabled_operations_never_act_and_rewrite_options_follow_the_policy():
    from icelake_assets.health.stats import TableStats

    s = settings(
        {
            "thresholds": {
                "manifests": {"max_count": 1},
                "operations": {"enabled": ["expire_snapshots"]},
                "small_files": {"partial_progress_enabled": False, "partial_progress_max_commits": 3},
            }
        }
    )
    policy = policy_for(s, TRIPS)
    stats = TableStats(
        table=TRIPS, metadata_location="", current_snapshot_id=None, target_file_size_bytes=1024, manifests=5
    )
    # operations.enabled names exactly the ops plan decides on, in run order.
    ops = [
        decide_expire(stats, policy).op,
        decide_orphans(0, 0, policy).op,
        decide_rewrite(stats, policy).op,
        decide_manifests(stats, policy).op,
    ]
    assert tuple(ops) == OPERATIONS
    decision = decide_manifests(stats, policy)
    assert not decision.act and "disabled by policy (operations.enabled: expire_snapshots)" in decision.reason
    assert decide_manifests(
        stats, policy_for(settings({"thresholds": {"manifests": {"max_count": 1}}}), TRIPS)
    ).act
    opts = rewrite_options(stats, policy)
    assert opts["partial-progress.enabled"] == "false" and opts["partial-progress.max-commits"] == "3"
    assert opts["max-concurrent-file-group-rewrites"] == "1"


def test_configuration_violations():
    required = ConfigurationPolicy(
        min_format_version=2,
        file_format="parquet",
        write_distribution_mode="hash",
        required_properties={"write.metadata.delete-after-commit.enabled": "true"},
    )
    good = {"write.distribution-mode": "hash", "write.metadata.delete-after-commit.enabled": "true"}
    assert configuration_violations(2, good, required) == []
    assert configuration_violations(3, {**good, "write.format.default": "PARQUET"}, required) == []
    bad = configuration_violations(1, {"write.format.default": "orc"}, required)
    assert [(v.setting, v.required, v.actual) for v in bad] == [
        ("format-version", ">= 2", "1"),
        ("write.format.default", "parquet", "orc"),
        ("write.distribution-mode", "hash", "unset"),
        ("write.metadata.delete-after-commit.enabled", "true", "unset"),
    ]
    assert bad[0].message == "format-version is 1, required >= 2"
    assert configuration_violations(1, {}, ConfigurationPolicy()) == []  # nothing required by default


def test_icelake_policy_prints_each_value_with_its_source(make_lake, capsys):
    import pyarrow as pa

    from icelake_assets.catalog.connection import open_catalog
    from icelake_assets.cli import main
    from icelake_assets_tests.conftest import TEST_THRESHOLDS, catalog_name

    lake = make_lake(
        extra={"policies": {"namespaces": {"taxi": {"mode": "enforce", "snapshots": {"min_keep": 7}}}}}
    )
    catalog = open_catalog(lake, catalog_name(lake), create=True)
    catalog.create_namespace("taxi")
    catalog.create_table(
        "taxi.trips",
        schema=pa.schema([pa.field("id", pa.int64())]),
        properties={"icelake.manifests.max_count": "12", "icelake.orphans.older_than_hours": "3"},
    )
    assert main(["--config", lake.source, "policy", "taxi.trips"]) == 0
    out = capsys.readouterr().out
    lines = {
        line.split()[0]: line.split(None, 2)[1:] for line in out.splitlines()[3:] if line and " " in line
    }
    assert out.startswith(
        f"policy of {catalog_name(lake)}.taxi.trips: mode enforce "
        "(icelake.yaml policies.namespaces['taxi'].mode)"
    )
    assert lines["snapshots.min_keep"] == ["7", "icelake.yaml policies.namespaces['taxi'].snapshots.min_keep"]
    assert lines["snapshots.max_count"] == ["20", "icelake.yaml thresholds.snapshots.max_count"]
    assert lines["manifests.max_count"] == ["12", "table property icelake.manifests.max_count"]
    assert lines["orphans.older_than_hours"] == ["72.0", "default"]
    assert "problem: table property icelake.orphans.older_than_hours='3' ignored" in out
    assert main(["--config", lake.source, "policy", "taxi.trips", "--changed"]) == 0
    changed = capsys.readouterr().out
    keys = {line.split()[0] for line in changed.splitlines()[3:] if not line.startswith("problem:")}
    assert keys == {"mode", "snapshots.min_keep", "snapshots.max_count", "manifests.max_count"} | {
        f"{section}.{k}" for section, values in TEST_THRESHOLDS.items() for k in values
    }


def test_a_table_property_may_only_raise_the_minimum_snapshot_age():
    s = settings({"thresholds": {"snapshots": {"min_age_hours": 24}}})
    assert (
        resolve_policy(s, TRIPS, {"icelake.snapshots.min_age_hours": "48"}).policy.snapshots.min_age_hours
        == 48
    )
    lowered = resolve_policy(s, TRIPS, {"icelake.snapshots.min_age_hours": "0"})
    assert lowered.policy.snapshots.min_age_hours == 24
    assert "a table property may only raise snapshots.min_age_hours" in "\n".join(lowered.problems)
