"""Changing a table's layout to a chosen sort key (layout/table_layout.py) on a real lake (SQLite
catalog, pyiceberg): the sort order and its reason land in one commit, the files that overlap on the
new key become the layout_drift finding the rewrite sorts, and a second change is refused inside
``layout.min_days_between_changes`` unless forced."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from icelake_assets.audit.layout_records import layout_change_record
from icelake_assets.audit.store import AuditLog
from icelake_assets.catalog.connection import open_catalog
from icelake_assets.health.cache import ManifestCache
from icelake_assets.health.findings import Severity
from icelake_assets.health.stats import compute_table_stats
from icelake_assets.layout.table_layout import (
    CHANGE_LAYOUT,
    LayoutChangeRefused,
    change_layout,
    last_change,
    sort_keys,
)
from icelake_assets.planning.layout import layout_drift_finding, plan_drift
from icelake_assets.policies import policy_for
from icelake_assets.types import TableRef
from icelake_assets_tests.conftest import catalog_name, new_lake
from icelake_assets_tests.health.conftest import SCHEMA, batch

NOW = datetime(2026, 12, 1, 12, tzinfo=UTC)


@pytest.fixture
def lake(tmp_path_factory):
    """``ns.events``: unpartitioned, 6 files each holding ids spread over the whole range (arrival
    order interleaves them), so every file overlaps every other on ``id``."""
    settings = new_lake(tmp_path_factory)
    catalog = open_catalog(settings, catalog_name(settings), create=True)
    catalog.create_namespace("ns")
    table = catalog.create_table(("ns", "events"), schema=SCHEMA)
    for n in range(6):
        table.append(batch(range(n, 600, 6), 0))
    return settings, table, TableRef.parse(f"{catalog_name(settings)}.ns.events")


def test_the_sort_order_and_its_reason_land_in_one_commit(lake):
    settings, table, ref = lake
    audit = AuditLog.from_settings(settings)
    change = change_layout(
        table, ref, ["id"], min_days_between_changes=7, predicted={"files_read": 1.0}, now=NOW
    )
    audit.append(layout_change_record(change, "manual", "test"))
    table.refresh()
    assert sort_keys(table) == ("id",) and change.old_keys == () and change.new_keys == ("id",)
    assert last_change(table) == NOW
    assert table.properties["icelake.layout.predicted"] == '{"files_read": 1.0}'
    [record] = [r for r in audit.records(str(ref)) if r.op == CHANGE_LAYOUT]
    assert record.decision == "acted" and record.results["new_keys"] == ["id"]
    assert record.recorded_at == NOW and record.results["by"] == "test"


def test_files_overlapping_on_the_new_key_become_drift_the_rewrite_sorts(lake):
    settings, table, ref = lake
    policy = policy_for(settings, ref, table.properties)
    before = compute_table_stats(table, policy, ManifestCache())
    assert layout_drift_finding(before, policy).severity is Severity.OK  # unsorted: nothing to drift from
    change_layout(table, ref, ["id"], min_days_between_changes=7, now=NOW)
    table.refresh()
    after = compute_table_stats(table, policy, ManifestCache())
    assert after.unsorted_files == 6
    assert layout_drift_finding(after, policy).severity is not Severity.OK
    plan = plan_drift(after, policy)
    assert plan.sort and plan.unsorted_files == 6


def test_a_second_change_waits_out_the_minimum_days_unless_forced(lake):
    _, table, ref = lake
    change_layout(table, ref, ["id"], min_days_between_changes=7, now=NOW)
    table.refresh()
    with pytest.raises(LayoutChangeRefused, match="min_days_between_changes is 7"):
        change_layout(table, ref, ["vendor"], min_days_between_changes=7, now=NOW + timedelta(days=3))
    table.refresh()
    assert sort_keys(table) == ("id",)  # nothing committed
    forced = change_layout(
        table, ref, ["vendor", "id"], min_days_between_changes=7, now=NOW + timedelta(days=3), force=True
    )
    assert forced.old_keys == ("id",) and forced.new_keys == ("vendor", "id")
    table.refresh()
    assert change_layout(table, ref, ["ts"], min_days_between_changes=7, now=NOW + timedelta(days=11))


def test_an_unknown_column_or_the_same_keys_are_refused_naming_why(lake):
    _, table, ref = lake
    with pytest.raises(LayoutChangeRefused, match="no column nope"):
        change_layout(table, ref, ["nope"], min_days_between_changes=7)
    change_layout(table, ref, ["id"], min_days_between_changes=0)
    table.refresh()
    with pytest.raises(LayoutChangeRefused, match="already sorted by id"):
        change_layout(table, ref, ["id"], min_days_between_changes=0)
