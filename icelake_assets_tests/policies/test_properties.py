"""Table properties: only allowlisted keys, each only toward safety; the rest ignored and reported."""

from pathlib import Path

import pytest

from icelake_assets.policies import (
    policy_for,
    resolve_policy,
)
from icelake_assets.settings import (
    OPERATIONS,
    default_settings,
)
from icelake_assets_tests.policies.conftest import TRIPS, settings


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
        None,
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
        policy_for(
            s, None, {"history.expire.max-snapshot-age-ms": str(2 * 3_600_000)}
        ).snapshots.max_age_hours
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


def test_a_table_property_may_only_raise_the_minimum_snapshot_age():
    s = settings({"thresholds": {"snapshots": {"min_age_hours": 24}}})
    assert (
        resolve_policy(s, TRIPS, {"icelake.snapshots.min_age_hours": "48"}).policy.snapshots.min_age_hours
        == 48
    )
    lowered = resolve_policy(s, TRIPS, {"icelake.snapshots.min_age_hours": "0"})
    assert lowered.policy.snapshots.min_age_hours == 24
    assert "a table property may only raise snapshots.min_age_hours" in "\n".join(lowered.problems)


def test_a_table_property_keeps_rows_longer_but_never_turns_retention_on_or_shortens_it():
    """Issue 40: retention.keep_days may only go up, and only where the settings file set it."""
    on = settings({"thresholds": {"retention": {"column": "ts", "keep_days": 30}}})
    longer = resolve_policy(on, TRIPS, {"icelake.retention.keep_days": "90"})
    assert longer.problems == () and longer.policy.retention.keep_days == 90
    shorter = resolve_policy(on, TRIPS, {"icelake.retention.keep_days": "7"})
    assert (
        shorter.policy.retention.keep_days == 30
        and "may only raise retention.keep_days" in shorter.problems[0]
    )
    off = resolve_policy(settings({}), TRIPS, {"icelake.retention.keep_days": "90"})
    assert off.policy.retention.keep_days is None
    assert "icelake.retention.keep_days='90' ignored" in off.problems[0]
