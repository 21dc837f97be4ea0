"""Policies on the Dagster assets, with a real SQLite catalog and a real Dagster instance: the
table_configuration check, the effective policy as asset metadata/owners/tags, and a table created
later in a governed namespace inheriting its policy when the definitions are reloaded."""

import pyarrow as pa
import pytest
from dagster import AssetCheckKey, AssetKey, AssetSelection, DagsterInstance, Definitions, define_asset_job

from icelake_assets.catalog.connection import open_catalog
from icelake_assets.orchestration.checks.configuration import CONFIG_CHECK
from icelake_assets.orchestration.project import build_definitions
from icelake_assets_tests.conftest import catalog_name, new_lake

GOVERNED = {
    "mode": "enforce",
    "owners": ["team:platform"],
    "tags": {"tier": "gold"},
    "snapshots": {"min_keep": 7},
    "configuration": {"min_format_version": 2, "write_distribution_mode": "hash", "severity": "error"},
}
SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.string())])


def _create(catalog, ident: str, properties: dict[str, str]):
    table = catalog.create_table(ident, schema=SCHEMA, properties=properties)
    table.append(pa.table({"id": [1, 2], "v": ["a", "b"]}, schema=SCHEMA))
    return table


@pytest.fixture(scope="module")
def lake(tmp_path_factory):
    settings = new_lake(tmp_path_factory, extra={"policies": {"namespaces": {"gov": GOVERNED}}})
    catalog = open_catalog(settings, catalog_name(settings), create=True)
    for ns in ("gov", "free"):
        catalog.create_namespace(ns)
    _create(catalog, "gov.good", {"write.distribution-mode": "hash"})
    _create(catalog, "gov.legacy", {"format-version": "1", "icelake.orphans.older_than_hours": "1"})
    _create(catalog, "free.loose", {"format-version": "1"})
    return {
        "settings": settings,
        "catalog": catalog,
        "name": catalog_name(settings),
        "instance": DagsterInstance.local_temp(str(tmp_path_factory.mktemp("dagster_home"))),
    }


def _spec(defs: Definitions, key: AssetKey):
    return next(s for s in defs.resolve_all_asset_specs() if s.key == key)


def _run_config_checks(defs: Definitions, keys: list[AssetKey], instance):
    job = define_asset_job(
        "config_checks_only", selection=AssetSelection.checks(*[AssetCheckKey(k, CONFIG_CHECK) for k in keys])
    )
    merged = Definitions.merge(defs, Definitions(jobs=[job]))
    result = merged.resolve_job_def("config_checks_only").execute_in_process(instance=instance)
    return {e.asset_key.path[-1]: e for e in result.get_asset_check_evaluations()}


def test_table_configuration_check_reports_violations_from_metadata(lake):
    defs = build_definitions(lake["settings"])
    name = lake["name"]
    keys = [AssetKey([name, ns, t]) for ns, t in (("gov", "good"), ("gov", "legacy"), ("free", "loose"))]
    evals = _run_config_checks(defs, keys, lake["instance"])
    assert set(evals) == {"good", "legacy", "loose"}
    assert evals["good"].passed and evals["good"].metadata["violations"].value == 0
    assert evals["loose"].passed  # outside the governed namespace nothing is required

    legacy = evals["legacy"]
    assert not legacy.passed and legacy.severity.value == "ERROR"
    rows = [
        (r.data["setting"], r.data["required"], r.data["actual"])
        for r in legacy.metadata["violation_details"].value.records
    ]
    assert rows == [("format-version", ">= 2", "1"), ("write.distribution-mode", "hash", "unset")]
    assert legacy.metadata["ignored_properties"].value == 1
    assert "icelake.orphans.older_than_hours='1' ignored" in legacy.metadata["problems"].value
    assert "format-version is 1, required >= 2" in legacy.description


def test_a_new_table_in_a_governed_namespace_inherits_its_policy_after_a_reload(lake):
    name, catalog = lake["name"], lake["catalog"]
    key = AssetKey([name, "gov", "fresh"])
    before = build_definitions(lake["settings"])
    assert key not in {s.key for s in before.resolve_all_asset_specs()}

    _create(catalog, "gov.fresh", {"write.distribution-mode": "hash"})  # a producer creates a table
    after = build_definitions(lake["settings"])  # what a code-location reload does
    spec = _spec(after, key)
    assert spec.tags["icelake/mode"] == "enforce" and spec.tags["tier"] == "gold"
    assert spec.owners == ["team:platform"]
    assert spec.metadata["policy/mode"].value == "enforce (icelake.yaml policies.namespaces['gov'].mode)"
    effective = {
        r.data["key"]: (r.data["value"], r.data["source"])
        for r in spec.metadata["policy/effective"].value.records
    }
    assert effective["snapshots.min_keep"] == (
        "7",
        "icelake.yaml policies.namespaces['gov'].snapshots.min_keep",
    )
    assert effective["configuration.min_format_version"][0] == "2"
    # The check of the new table exists and passes: it carries what the namespace requires.
    assert _run_config_checks(after, [key], lake["instance"])["fresh"].passed

    # A table outside the namespace keeps the safe defaults of a newly configured catalog.
    loose = _spec(after, AssetKey([name, "free", "loose"]))
    assert loose.tags["icelake/mode"] == "propose" and not loose.owners
    assert loose.metadata["policy/mode"].value == "propose (default)"


def test_the_resource_resolves_the_table_own_layers(lake):
    from icelake_assets.orchestration.resources import IcelakeResource

    resource = IcelakeResource(config_path=lake["settings"].source)
    table = resource.load_table(_ref(lake, "gov", "good"))
    assert resource.policy(table).snapshots.min_keep == 7  # found through the table's catalog and identifier
    assert resource.policy(resource.load_table(_ref(lake, "free", "loose"))).snapshots.min_keep == 5


def test_the_resource_resolves_a_table_policy_once_until_its_properties_change(lake):
    """Issue 39: a run's ops each ask for the table's policy; it is resolved once per table and
    properties while the resource lives, and again when a property changes."""
    from icelake_assets.orchestration.resources import IcelakeResource

    _create(lake["catalog"], "gov.memo", {})
    resource = IcelakeResource(config_path=lake["settings"].source)
    ref = _ref(lake, "gov", "memo")
    first = resource.effective_policy(resource.load_table(ref))
    assert resource.effective_policy(resource.load_table(ref)) is first
    assert resource.policy(resource.load_table(ref)) is first.policy
    with resource.load_table(ref).transaction() as tx:
        tx.set_properties({"icelake.snapshots.min_keep": "9"})
    changed = resource.load_table(ref)
    assert (
        resource.effective_policy(changed) is not first and resource.policy(changed).snapshots.min_keep == 9
    )


def _ref(lake, ns, table):
    from icelake_assets.catalog.connection import TableRef

    return TableRef(lake["name"], (ns,), table)


def test_a_table_writer_cannot_overrule_the_operator(tmp_path_factory):
    """Issue 10 item 2 through the definitions: a table's properties switch nothing on and loosen nothing;
    the table_configuration check says what was ignored and why."""
    settings = new_lake(
        tmp_path_factory,
        extra={
            "policies": {
                "defaults": {
                    "operations": {"enabled": ["expire_snapshots"]},
                    "guards": {"quiet_period_minutes": 30},
                }
            }
        },
    )
    name = catalog_name(settings)
    catalog = open_catalog(settings, name, create=True)
    catalog.create_namespace("free")
    rogue = {
        "icelake.mode": "enforce",
        "icelake.operations.enabled": "rewrite_data_files",
        "icelake.guards.quiet_period_minutes": "0",
        "icelake.guards.max_rewrite_bytes": str(10**18),
        "icelake.partitions.max_retries": "1000000",
        "icelake.sensor.interval_seconds": "30",
        "icelake.schedule.cron": "* * * * *",
        "icelake.snapshots.min_keep": "9",
    }
    _create(catalog, "free.rogue", rogue)
    defs = build_definitions(settings)
    key = AssetKey([name, "free", "rogue"])
    assert defs.resolve_sensor_def("icelake_maintenance_sensor").minimum_interval_seconds == 300  # not 30
    assert not [s for s in defs.schedules if "maintenance_schedule" in s.name]
    spec = _spec(defs, key)
    assert spec.tags["icelake/mode"] == "propose"
    effective = {r.data["key"]: r.data["value"] for r in spec.metadata["policy/effective"].value.records}
    assert effective["operations.enabled"] == "expire_snapshots"
    assert effective["guards.quiet_period_minutes"] == "30.0"
    assert effective["snapshots.min_keep"] == "9"  # keeping more snapshots is the table's call
    assert "guards.max_rewrite_bytes" not in effective and "partitions.max_retries" not in effective

    result = _run_config_checks(defs, [key], DagsterInstance.ephemeral())["rogue"]
    assert not result.passed and result.metadata["ignored_properties"].value == 7
    problems = result.metadata["problems"].value
    for expected in (
        "icelake.mode='enforce' ignored: only the settings file sets the mode",
        "icelake.operations.enabled='rewrite_data_files' ignored: only the settings file",
        "icelake.guards.quiet_period_minutes='0' ignored: a table property may only raise",
        "icelake.guards.max_rewrite_bytes='1000000000000000000' ignored: "
        "guards.max_rewrite_bytes: Input should be less than or equal to",
        "icelake.partitions.max_retries='1000000' ignored: only the settings file sets",
        "icelake.sensor.interval_seconds='30' ignored: only the settings file sets the sensor",
        "icelake.schedule.cron='* * * * *' ignored: only the settings file sets schedules",
    ):
        assert expected in problems
