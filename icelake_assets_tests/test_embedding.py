"""The product added to a user's own Dagster project (embedding.py): a real dg-style project on disk
with its own `pyspark` resource, io_manager, executor, pool (limit 5), asset, check and job, and the
product added as a Component in `defs/icelake/defs.yaml`. Dagster's own loader builds it
(`load_from_defs_folder`, and `dagster definitions validate` in a subprocess); a real sensor tick on
a real instance launches maintenance that heals the user's degraded table on real Spark."""

import importlib
import os
import sys
import textwrap
from pathlib import Path

import pytest
import yaml
from dagster import AssetKey, DagsterInstance, evaluate_automation_conditions, multiprocess_executor
from dagster_pyspark import PySparkResource

from icelake_assets.catalog.connection import TableRef, load_table, open_catalog
from icelake_assets.embedding import icelake_definitions
from icelake_assets.orchestration.checks.asset_checks import CHECKS_JOB
from icelake_assets.orchestration.resources import IcebergSparkResource
from icelake_assets.orchestration.sensors.maintenance import TABLE_TAG
from icelake_assets.settings.asset_keys import AssetKeySettings, use_asset_keys
from icelake_assets_tests.conftest import catalog_name, dagster_definitions_validate, sensor_tick
from icelake_assets_tests.orchestration.sensors.test_maintenance import SCHEMA, _batch, _lake

USER_POOL = "shop_db"


REPORTS = """\
import dagster as dg
from dagster_pyspark import PySparkResource


@dg.asset(key=["shop", "report"], pool="shop_db", deps=[dg.AssetKey(["lake", "shop", "ns", "t"])])
def report(pyspark: PySparkResource) -> None:
    pass


@dg.asset_check(asset=report)
def report_is_fresh() -> dg.AssetCheckResult:
    return dg.AssetCheckResult(passed=True)


shop_report = dg.define_asset_job("shop_report", selection=[report])
"""

# The project's own code writes the table (key sales/orders) and feeds a report that refreshes on
# every new version of it (declarative automation).
OWN_TABLE = """\
import dagster as dg


@dg.asset(key=["sales", "orders"], pool="shop_db")
def orders() -> None:
    pass


@dg.asset(key=["shop", "report"], deps=[orders], automation_condition=dg.AutomationCondition.eager())
def report() -> None:
    pass


shop_orders = dg.define_asset_job("shop_orders", selection=[orders])
"""


# A user's project's pyproject.toml as `create-dagster project shop` writes it (the dg parts).
SHOP_PYPROJECT = textwrap.dedent(
    """\
    [project]
    name = "shop"
    version = "0.1.0"

    [tool.dg]
    directory_type = "project"

    [tool.dg.project]
    root_module = "shop"
    """
)


def _project(root: Path, icelake_yaml: Path, attributes=None, module: str = REPORTS) -> Path:
    """A user's project as `dg scaffold project` lays it out, with the product added as a Component."""
    package = root / "src" / "shop"
    (package / "defs" / "icelake").mkdir(parents=True)
    (root / "pyproject.toml").write_text(SHOP_PYPROJECT)
    (package / "__init__.py").write_text("")
    (root / "io").mkdir()
    (package / "defs" / "__init__.py").write_text("")
    (package / "definitions.py").write_text(
        textwrap.dedent(
            f"""\
            from pathlib import Path

            import dagster as dg
            from dagster_pyspark import PySparkResource


            @dg.definitions
            def defs():
                return dg.Definitions.merge(
                    dg.load_from_defs_folder(path_within_project=Path(__file__).parent),
                    dg.Definitions(
                        resources={{
                            "pyspark": PySparkResource(spark_config={{"spark.app.name": "shop"}}),
                            "io_manager": dg.FilesystemIOManager(base_dir={str(root / "io")!r}),
                        }},
                        executor=dg.multiprocess_executor,
                    ),
                )
            """
        )
    )
    (package / "defs" / "reports.py").write_text(module)
    (package / "defs" / "icelake" / "defs.yaml").write_text(
        yaml.safe_dump(
            {
                "type": "icelake_assets.embedding.IcelakeComponent",
                "attributes": {
                    "config": os.path.relpath(icelake_yaml, package / "defs" / "icelake"),
                    **(
                        attributes
                        or {"asset_key_prefix": ["lake"], "asset_key_template": "shop/{namespace}/{table}"}
                    ),
                },
            }
        )
    )
    return root


def _load(root: Path, monkeypatch):
    monkeypatch.syspath_prepend(str(root / "src"))
    for name in [m for m in sys.modules if m == "shop" or m.startswith("shop.")]:
        del sys.modules[name]
    return importlib.import_module("shop.definitions").defs()


@pytest.fixture
def shop(make_lake, tmp_path, monkeypatch):
    settings, ref, table = _lake(make_lake)
    root = _project(tmp_path / "shop", Path(settings.source))
    yield settings, ref, table, _load(root, monkeypatch), root
    use_asset_keys(AssetKeySettings())  # the process's scheme back to the default for other tests


def _validate(root: Path) -> None:
    """Dagster's own validation of the user's project, as the user runs it."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root / "src"), *sys.path])}
    dagster_definitions_validate(["-m", "shop.definitions"], root, env)


def test_the_component_loads_beside_the_users_resources_executor_and_checks(shop):
    settings, ref, _, defs, root = shop
    key = AssetKey(["lake", "shop", "ns", "t"])
    # The user's resources are the user's; the product's have their own keys.
    assert isinstance(defs.resources["pyspark"], PySparkResource)
    assert isinstance(defs.resources["icelake_spark"], IcebergSparkResource)
    # The user's job keeps the user's executor; the product's run in process (one Spark JVM per run).
    assert defs.resolve_job_def("shop_report").executor_def is multiprocess_executor
    assert defs.resolve_job_def("icelake_maintenance").executor_def.name == "in_process"
    assert defs.resolve_job_def(CHECKS_JOB).executor_def.name == "in_process"
    # The table's key follows the component's prefix and template; the user's asset depends on it.
    assert defs.resolve_assets_def(key).keys == {key}
    assert key in defs.resolve_asset_graph().get(AssetKey(["shop", "report"])).parent_keys
    # The product's checks job selects the product's checks only.
    selected = defs.resolve_job_def(CHECKS_JOB).asset_layer.asset_graph.asset_check_keys
    assert selected and all(c.asset_key != AssetKey(["shop", "report"]) for c in selected)
    _validate(root)


def test_a_sensor_launched_run_heals_the_users_table_and_leaves_the_users_pool_alone(shop, tmp_path):
    settings, ref, table, defs, _ = shop
    (tmp_path / "home").mkdir()
    with DagsterInstance.local_temp(str(tmp_path / "home")) as instance:
        assert instance.global_op_concurrency_default_limit is None  # the user's deployment sets none
        instance.event_log_storage.set_concurrency_slots(USER_POOL, 5)
        tick = sensor_tick(defs, settings, instance)
        [request] = tick.run_requests
        assert request.tags[TABLE_TAG] == str(ref)
        assert request.asset_selection == [AssetKey(["lake", "shop", "ns", "t"])]
        # The product's pool got a limit of one; the user's pool keeps its five; no default appeared.
        pools = set(instance.event_log_storage.get_concurrency_keys())
        product_pools = [p for p in pools if p.startswith("icelake/")]
        assert len(product_pools) == 1
        assert instance.event_log_storage.get_concurrency_info(product_pools[0]).slot_count == 1
        assert instance.event_log_storage.get_concurrency_info(USER_POOL).slot_count == 5
        assert instance.global_op_concurrency_default_limit is None

        result = defs.resolve_job_def(request.job_name).execute_in_process(
            instance=instance, asset_selection=request.asset_selection, tags=request.tags
        )
        assert result.success
        checks = result.get_asset_check_evaluations()
        assert checks and all(e.passed for e in checks)
        assert {e.asset_key for e in checks} == {AssetKey(["lake", "shop", "ns", "t"])}
        healed = load_table(open_catalog(settings, catalog_name(settings)), ref)
        files = list(healed.inspect.files().column("file_path"))
        assert len(files) < 25 and healed.scan().to_arrow().num_rows == 250


def test_the_factory_takes_the_same_arguments(make_lake):
    settings, ref, _ = _lake(make_lake, files=2)
    try:
        defs = icelake_definitions(settings.source, asset_key_template="{table}")
        assert defs.resolve_assets_def(AssetKey(["t"])) is not None
        assert defs.executor is None and "pyspark" not in (defs.resources or {})
    finally:
        use_asset_keys(AssetKeySettings())


def test_a_table_the_project_defines_is_one_node_with_the_products_checks_and_maintenance(
    make_lake, tmp_path, monkeypatch
):
    """The project's code writes the table (its asset `sales/orders`): the product defines no second
    node, attaches its checks to the project's asset, and its sensor-launched maintenance heals the
    table recording an observation, not a materialization, so the project's eager report does not
    rerun. (The lake's other table, `ns.t`, is healthy: 2 files.)"""
    settings, _, _ = _lake(make_lake, files=2)
    catalog = open_catalog(settings, catalog_name(settings))
    catalog.create_namespace("sales")
    orders = catalog.create_table(("sales", "orders"), SCHEMA)
    for i in range(25):
        orders.append(_batch(i * 10, 10))
    ref = TableRef(catalog_name(settings), ("sales",), "orders")
    attributes = {"asset_key_template": "{namespace}/{table}", "tables_defined_by_project": True}
    root = _project(tmp_path / "shop", Path(settings.source), attributes, OWN_TABLE)
    try:
        defs = _load(root, monkeypatch)
        key = AssetKey(["sales", "orders"])
        graph = defs.resolve_asset_graph()
        assert not defs.resolve_assets_def(key).node_def.name.startswith(
            "maintain"
        )  # the project's own asset
        checks = {c.name for c in graph.asset_check_keys if c.asset_key == key}
        assert {"health", "small_files", "orphan_files", "manifest_fragmentation"} <= checks
        assert defs.resolve_job_def("shop_orders").executor_def is multiprocess_executor
        assert isinstance(defs.resources["pyspark"], PySparkResource)
        _validate(root)

        (tmp_path / "home").mkdir()
        with DagsterInstance.local_temp(str(tmp_path / "home")) as instance:
            instance.event_log_storage.set_concurrency_slots(USER_POOL, 5)
            automation = evaluate_automation_conditions(defs=defs, instance=instance)
            tick = sensor_tick(defs, settings, instance)
            [request] = tick.run_requests
            assert request.asset_selection is None and request.tags[TABLE_TAG] == str(ref)
            job = defs.resolve_job_def(request.job_name)
            assert job.name.startswith("icelake_maintenance__") and not job.asset_layer.selected_asset_keys
            result = job.execute_in_process(instance=instance, tags=request.tags)
            assert result.success
            assert not result.get_asset_materialization_events()
            [observed] = [
                e
                for e in result.get_asset_observation_events()
                if "summary" in e.event_specific_data.asset_observation.metadata
            ]
            assert observed.asset_key == key
            assert instance.get_latest_materialization_event(key) is None
            # The project's declarative automation sees no new version of its table: no report run.
            after = evaluate_automation_conditions(defs=defs, instance=instance, cursor=automation.cursor)
            assert after.total_requested == 0
            healed = load_table(open_catalog(settings, catalog_name(settings)), ref)
            assert len(list(healed.inspect.files().column("file_path"))) < 25
            assert healed.scan().to_arrow().num_rows == 250
            # The run is the table's in flight and in history (its tag names it: no asset selection).
            again = sensor_tick(defs, settings, instance, cursor=tick.cursor)
            assert again.run_requests == []
            assert instance.event_log_storage.get_concurrency_info(USER_POOL).slot_count == 5
    finally:
        use_asset_keys(AssetKeySettings())
