"""Lineage from settings and table properties: the asset graph shows writer -> table -> reader."""

import pytest

from icelake_assets.catalog.connection import TableRef, open_catalog
from icelake_assets.demo.assets import WRITER_KEY
from icelake_assets.demo.lake import build_demo_lake
from icelake_assets.orchestration.project import build_definitions
from icelake_assets.policies import resolve_policy
from icelake_assets.settings import SettingsError
from icelake_assets_tests.conftest import catalog_name


def _parents(defs) -> dict[str, set[str]]:
    graph = defs.resolve_asset_graph()
    return {
        k.to_user_string(): {p.to_user_string() for p in graph.get(k).parent_keys}
        for k in graph.get_all_asset_keys()
    }


def _lake(make_lake, tables_policy):
    settings = make_lake(extra={"policies": {"tables": tables_policy}})
    build_demo_lake(settings, catalog=catalog_name(settings), scale="test")
    return settings, catalog_name(settings)


def test_declared_producers_and_consumers_become_graph_edges(make_lake):
    settings, cat = _lake(
        make_lake,
        {
            "taxi.trips": {
                "lineage": {
                    "producers": ["icelake_demo/trips_writer", "ingest/kafka_trips"],
                    "consumers": ["icelake_demo/daily_revenue", "bi/dashboard"],
                }
            },
            "sales.orders": {"lineage": {"consumers": ["bi/dashboard"]}},
        },
    )
    parents = _parents(build_definitions(settings))
    trips, orders = f"{cat}/taxi/trips", f"{cat}/sales/orders"
    assert parents[trips] == {"icelake_demo/trips_writer", "ingest/kafka_trips"}
    assert parents["icelake_demo/daily_revenue"] == {trips}
    # An external consumer shared by two tables depends on both; external producers have no parents.
    assert parents["bi/dashboard"] == {trips, orders}
    assert parents["ingest/kafka_trips"] == set()
    assert parents[f"{cat}/events/clicks"] == set()


def test_a_consumer_that_is_another_table_links_the_two_tables(make_lake):
    settings, cat = _lake(make_lake, {})
    tbl = open_catalog(settings, cat).load_table(("sales", "orders"))
    with tbl.transaction() as tx:
        tx.set_properties({"icelake.lineage.consumers": f"{cat}/events/clicks"})
    parents = _parents(build_definitions(settings))
    assert parents[f"{cat}/events/clicks"] == {f"{cat}/sales/orders"}


def test_lineage_from_a_table_property(make_lake):
    settings, cat = _lake(make_lake, {})
    tbl = open_catalog(settings, cat).load_table(("taxi", "trips"))
    with tbl.transaction() as tx:
        tx.set_properties(
            {
                "icelake.lineage.producers": "ingest/trips, ingest/late_trips",
                "icelake.lineage.consumers": "icelake_demo/daily_revenue",
            }
        )
    defs = build_definitions(settings)
    parents = _parents(defs)
    assert parents[f"{cat}/taxi/trips"] == {"ingest/trips", "ingest/late_trips"}
    assert parents["icelake_demo/daily_revenue"] == {f"{cat}/taxi/trips"}
    assert WRITER_KEY not in defs.resolve_asset_graph().get_all_asset_keys()


def test_an_invalid_key_in_a_property_is_ignored_and_named(make_lake):
    settings, cat = _lake(make_lake, {})
    tbl = open_catalog(settings, cat).load_table(("taxi", "trips"))
    with tbl.transaction() as tx:
        tx.set_properties({"icelake.lineage.producers": "ingest/bad key!"})
    effective = resolve_policy(settings, TableRef.parse(f"{cat}.taxi.trips"), tbl.properties)
    assert effective.policy.lineage.producers == ()
    assert any("icelake.lineage.producers" in p and "ingest/bad key!" in p for p in effective.problems)
    assert _parents(build_definitions(settings))[f"{cat}/taxi/trips"] == set()


def test_an_invalid_key_in_the_settings_names_the_key(make_lake):
    with pytest.raises(SettingsError, match=r"lineage\.consumers.*'bi//x'"):
        make_lake(extra={"policies": {"tables": {"taxi.trips": {"lineage": {"consumers": ["bi//x"]}}}}})


@pytest.mark.parametrize(
    "tables_policy, message",
    [
        (
            {"taxi.trips": {"lineage": {"producers": ["icelake_demo/daily_revenue"]}}},
            "cannot be one of its producers",
        ),
        (
            {
                "taxi.trips": {"lineage": {"producers": ["icelake_demo/trips_writer"]}},
                "sales.orders": {"lineage": {"producers": ["icelake_demo/trips_writer"]}},
            },
            "declared for both",
        ),
    ],
)
def test_impossible_declarations_are_refused_with_the_cause(make_lake, tables_policy, message):
    settings, _ = _lake(make_lake, tables_policy)
    with pytest.raises(SettingsError, match=message):
        build_definitions(settings)


def test_a_table_producing_itself_is_refused(make_lake):
    settings, cat = _lake(make_lake, {})
    tbl = open_catalog(settings, cat).load_table(("taxi", "trips"))
    with tbl.transaction() as tx:
        tx.set_properties({"icelake.lineage.producers": f"{cat}/taxi/trips"})
    with pytest.raises(SettingsError, match="is the table itself"):
        build_definitions(settings)
