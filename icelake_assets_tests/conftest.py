"""Shared fixtures: a real SQLite SQL catalog per test lake, one real Spark session per test process.

Spark's getOrCreate reuses the live session, so every lake gets its own catalog name; the Spark
resource registers a new catalog on the live session at runtime (see IcebergSparkResource)."""

from __future__ import annotations

import atexit
import functools
import itertools
import os
import re
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from icelake_assets.catalog.connection import TableRef
from icelake_assets.catalog.discovery import DiscoveredTable
from icelake_assets.maintenance.spark.session import spark_config
from icelake_assets.orchestration.resources import IcebergSparkResource, IcelakeResource
from icelake_assets.partitions.layout import LayoutField, PartitionLayout
from icelake_assets.settings import Settings, load_settings

_LAKES = itertools.count()
# No cached table inventory unless a test asks for one (catalog/test_inventory.py): make sets
# DAGSTER_HOME, and a cache there would outlive the test lakes (subprocesses inherit this too).
os.environ.setdefault("ICELAKE_INVENTORY", "off")
# Each test process runs its own Spark driver (the fixture session below); the shared resident driver
# is tested on its own (maintenance/spark/test_resident_spark.py) and stopped by its PID there.
os.environ.setdefault("ICELAKE_SPARK_SESSION", "per_run")
# Under pytest-xdist (`make test`) every worker is a process of its own: what the environment's
# defaults would share between them (the resident drivers' folder, the health cache, DAGSTER_HOME's
# instance) gets a folder per worker, removed when the worker exits.
if _WORKER := os.environ.get("PYTEST_XDIST_WORKER"):
    _OWN = Path(tempfile.mkdtemp(prefix=f"icelake-tests-{_WORKER}-"))
    atexit.register(shutil.rmtree, _OWN, ignore_errors=True)
    os.environ["ICELAKE_SPARK_STATE_DIR"] = str(_OWN / "spark")
    os.environ["XDG_CACHE_HOME"] = str(_OWN / "cache")
    os.environ["DAGSTER_HOME"] = str(_OWN / "dagster_home")
    (_OWN / "dagster_home").mkdir()

# Thresholds scaled to the demo lake's "test" size (the defaults are sized for production tables).
TEST_THRESHOLDS: dict[str, Any] = {
    "small_files": {"max_files_per_partition": 20},
    # The test lakes' snapshots are seconds old: min_age_hours 0 lets expiry act on them (tests of the
    # default minimum age set their own thresholds).
    "snapshots": {"max_count": 20, "min_keep": 5, "min_age_hours": 0},
    "manifests": {"max_count": 10},
    # One-pass orphan removal, as before the recovery window (tests of the two phases set their own).
    "orphans": {"recovery_window_hours": 0},
}


def write_settings(
    folder: Path, catalog: str, thresholds: dict[str, Any] | None = None, extra: dict[str, Any] | None = None
) -> Path:
    data: dict[str, Any] = {
        "catalogs": {
            catalog: {"type": "sql", "uri": "sqlite:///lake/catalog.db", "warehouse": "lake/warehouse"}
        },
        "thresholds": thresholds if thresholds is not None else TEST_THRESHOLDS,
        **(extra or {}),
    }
    path = folder / "icelake.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def new_lake(
    tmp_path_factory,
    thresholds: dict[str, Any] | None = None,
    extra: dict[str, Any] | None = None,
    accept: Callable[[str], bool] | None = None,
) -> Settings:
    """A new lake folder with its own catalog name; returns its Settings (source = the YAML file).
    ``accept``: a test whose outcome depends on the name (table groups hash table names into pools)
    takes the next name it accepts, so it does not depend on how many lakes ran before it."""
    folder = tmp_path_factory.mktemp("lake")
    name = f"lake{next(_LAKES)}_{os.getpid()}"
    while accept is not None and not accept(name):
        name = f"lake{next(_LAKES)}_{os.getpid()}"
    (folder / "lake" / "warehouse").mkdir(parents=True)
    return load_settings(write_settings(folder, name, thresholds, extra))


def catalog_name(settings: Settings) -> str:
    return next(iter(settings.catalogs))


def sensor_tick(defs, settings: Settings, instance, sensor: str | None = None, cursor: str | None = None):
    """One real tick of ``sensor`` (default: the maintenance sensor) of ``defs``, as the daemon runs it."""
    from dagster import build_sensor_context, serialize_value

    from icelake_assets.orchestration.sensors.maintenance import MAINTENANCE_SENSOR

    context = build_sensor_context(
        instance=instance,
        cursor=cursor,
        definitions=defs,
        resources={"icelake": IcelakeResource(config_path=settings.source)},
    )
    result = defs.get_sensor_def(sensor or MAINTENANCE_SENSOR).evaluate_tick(context)
    # What the daemon sends across its gRPC boundary: fails on anything Dagster cannot serialize
    # (an enum in metadata did, only under the daemon).
    serialize_value(result)
    return result


def dagster_definitions_validate(target: list[str], cwd: Path, env: dict[str, str]) -> None:
    """``dagster definitions validate <target>`` as a user runs it (a subprocess): it must pass."""
    import subprocess
    import sys

    proc = subprocess.run(
        [str(Path(sys.executable).parent / "dagster"), "definitions", "validate", *target],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Validation successful" in proc.stdout + proc.stderr


@pytest.fixture
def make_lake(tmp_path_factory) -> Callable[..., Settings]:
    return lambda thresholds=None, extra=None: new_lake(tmp_path_factory, thresholds, extra)


@pytest.fixture
def spark_for(request) -> Callable[[Settings], Any]:
    """The process's Spark session with the lake's catalog registered."""

    def get(settings: Settings):
        return IcebergSparkResource(spark_config=spark_config(settings)).spark_session

    return get


def build_nested_lake(settings: Settings, spark, gc_disabled: tuple[str, ...] = ("g",)) -> dict[str, Any]:
    """Tables created by Spark's JDBC catalog, where ``a.b.c`` lives inside ``a.b``'s location
    (``warehouse/a/b/c``): ``a.b``, ``a.b.c``, ``a.d``, and ``a.<x>`` with ``gc.enabled=false`` for each
    ``gc_disabled``. Every file is 5 days old and each table but ``a.b.c`` holds 3 old planted orphans.
    Returns the refs and the planted orphans by short name (``b``, ``c``, ``d``...)."""
    from icelake_assets.catalog.connection import TableRef, load_table, open_catalog
    from icelake_assets.demo.lake import age_all_files, plant_orphans

    name = catalog_name(settings)
    open_catalog(settings, name, create=True)  # creates the catalog tables Spark's JDBC catalog uses
    q = lambda *parts: ".".join(f"`{p}`" for p in (name, *parts))  # noqa: E731
    spark.sql(f"CREATE NAMESPACE {q('a')}")
    spark.sql(f"CREATE NAMESPACE {q('a', 'b')}")
    idents = {"b": ("a", "b"), "c": ("a", "b", "c"), "d": ("a", "d"), **{g: ("a", g) for g in gc_disabled}}
    for short, ident in idents.items():
        props = " TBLPROPERTIES ('gc.enabled'='false')" if short in gc_disabled else ""
        spark.sql(f"CREATE TABLE {q(*ident)} (id bigint, s string) USING iceberg{props}")
        for i in range(2):
            spark.sql(f"INSERT INTO {q(*ident)} VALUES ({2 * i}, '{short}'), ({2 * i + 1}, '{short}')")
    catalog = open_catalog(settings, name)
    refs = {short: TableRef(name, ident[:-1], ident[-1]) for short, ident in idents.items()}
    tables = {short: load_table(catalog, ref) for short, ref in refs.items()}
    for short in ("b", "d", *gc_disabled):  # a.b's folder holds a.b.c's: it is aged with it
        age_all_files(tables[short], 5)
    planted = {short: plant_orphans(tables[short], 3, age_days=5) for short in ("b", "d", *gc_disabled)}
    return {"refs": refs, "tables": tables, "planted": planted, "catalog": catalog}


# Integration tests start a real engine or server: a Spark JVM, SeaweedFS, PostgreSQL, a Dagster
# webserver or instance, a browser, a subprocess. A test module that names one of them is marked
# `integration` (the rest are unit tests: pure functions, pyiceberg over a SQLite catalog, Dagster
# definitions without an instance). `make unit` runs the unit tests alone; `make test` runs both.
_INTEGRATION = re.compile(
    r"spark_session|SparkSession|IcebergSparkResource|spark_for|execute_maintenance|execute_in_process"
    r"|DagsterInstance|instance_for_test|sensor_tick|build_sensor_context|evaluate_tick"
    r"|\bweed\b|postgres|webserver|playwright|promtool|subprocess|definitions_validate|spark_cluster"
    r"|run_client"  # a client process that starts a resident Spark driver (maintenance/spark/)
)


@functools.cache
def _is_integration(path: str) -> bool:
    return bool(_INTEGRATION.search(Path(path).read_text()))


# `make test` runs the suite on pytest-xdist workers with `--dist loadgroup`: a module's tests stay on
# one worker (its module-scoped lakes, servers and Spark session are built once), and these modules,
# whose assertions time a kill, a signal, a fence or a browser against wall clocks, share one group:
# they run one after another on one worker, never two of them at once.
ONE_AT_A_TIME = frozenset(
    {
        "maintenance/spark/test_resident_fence.py",
        "maintenance/spark/test_resident_spark.py",
        "orchestration/test_crash_recovery.py",
        "orchestration/test_shared_spark_runs.py",
        "test_run_launcher.py",
        "ui/test_browser.py",
        "ui/test_partition_checks_browser.py",
    }
)
_HERE = Path(__file__).parent
assert all((_HERE / m).is_file() for m in ONE_AT_A_TIME), "ONE_AT_A_TIME names a module that moved"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if _is_integration(str(item.path)):
            item.add_marker(pytest.mark.integration)
        module = item.path.relative_to(_HERE).as_posix()
        item.add_marker(pytest.mark.xdist_group("one_at_a_time" if module in ONE_AT_A_TIME else module))


def discovered_table(
    name: str, *, day: tuple[str, str] | None = None, identity: bool = False
) -> DiscoveredTable:
    """A discovered table ``lake.ns.<name>`` from facts alone (no catalog): unpartitioned, by
    ``day(ts)`` over ``day`` (first, last), or by identity on a string column."""
    fields: tuple[LayoutField, ...] = ()
    if day:
        fields = (LayoutField("ts_day", 2, ("ts",), "timestamptz", "day", day[0], day[1]),)
    elif identity:
        fields = (LayoutField("kind", 3, ("kind",), "string", "identity"),)
    layout = PartitionLayout(f"ns.{name}", 0, fields, {0: fields}, (0,)) if fields else None
    return DiscoveredTable(
        ref=TableRef("lake", ("ns",), name),
        location=f"/lake/{name}",
        format_version=2,
        partition_spec="x",
        sort_order="unsorted",
        current_snapshot_id=1,
        layout=layout,
    )
