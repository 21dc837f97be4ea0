"""Policy resolution: precedence of the layers, patterns, sources, invalid files, one signature."""

from typing import Any

import pytest

from icelake_assets.catalog.connection import TableRef
from icelake_assets.policies import (
    PolicyError,
    policy_for,
    resolve_policy,
)
from icelake_assets.settings import (
    SettingsError,
)
from icelake_assets_tests.policies.conftest import TRIPS, merge, settings

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


@pytest.mark.parametrize("top", range(len(LAYERS)))
def test_precedence_the_most_specific_layer_wins(top):
    data: dict = {}
    props: dict[str, str] = {}
    for section, p, _ in LAYERS[: top + 1]:
        data = merge(data, section)
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
    other = resolve_policy(s, TableRef.parse("c2.events.clicks"))
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
    assert (
        resolve_policy(s, TableRef.parse("c1.tolls.daily")).policy.snapshots.min_keep == 1
    )  # only 't*' matches
    assert (
        resolve_policy(s, TableRef.parse("c2.taxi.trips")).policy.snapshots.min_keep == 2
    )  # 'c1.taxi' is for c1 only


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
    assert (
        resolve_policy(
            s, TableRef.parse("c1.events.clicks")
        ).policy.small_files.max_concurrent_file_group_rewrites
        == 1
    )
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


def test_a_policy_is_resolved_for_a_table_ref_or_the_lakes_defaults():
    s = settings({"policies": {"namespaces": {"taxi": {"manifests": {"max_count": 9}}}}})
    assert policy_for(s, TRIPS).manifests.max_count == 9
    assert (
        policy_for(
            s, TableRef("c1", ("taxi",), "trips"), {"icelake.manifests.max_count": "14"}
        ).manifests.max_count
        == 14
    )
    assert (
        policy_for(s, None, {"icelake.manifests.max_count": "60"}).manifests.max_count == 60
    )  # no table: no layers
    assert policy_for(s, None).manifests.max_count == 50
    assert resolve_policy(s, None).table == "<any table>"
    with pytest.raises(KeyError, match="not a policy key"):
        resolve_policy(s, TRIPS).source_of("snapshots.min_kept")


@pytest.mark.parametrize("table", ["c1.taxi.trips", {"icelake.manifests.max_count": "60"}, object()])
def test_anything_but_a_table_ref_is_refused_with_the_conversion_to_use(table):
    # Names and pyiceberg Tables become TableRefs where they enter (TableRef.parse, table_ref).
    with pytest.raises(TypeError, match="resolved for a TableRef .* not .*TableRef.parse"):
        resolve_policy(settings(), table)
