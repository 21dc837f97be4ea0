"""A run worker builds only what its run selects (issue 24: time to first op at 10,000 tables): the
table groups of the run's pools, with the very ops the code server showed; anything else (the whole
job, a lake-wide asset) builds everything. And what the code server records for its run workers (the
inventory it loaded) really reaches them: Dagster hands a run worker the load context's pending
metadata, not a @definitions function's Definitions metadata."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from dagster import DagsterEventType, DagsterInstance, DagsterRunStatus
from dagster._core.definitions.definitions_load_context import DefinitionsLoadContext, DefinitionsLoadType
from dagster._core.definitions.repository_definition.repository_definition import RepositoryLoadData
from dagster._core.execution.api import create_execution_plan

from bench.scale.load_child import load_repository
from bench.scale.run_worker import prepare_run
from icelake_assets import definitions
from icelake_assets.catalog import inventory
from icelake_assets.demo.lake import build_demo_lake
from icelake_assets.orchestration import project
from icelake_assets.orchestration.checks.asset_checks import OVERVIEW_KEY
from icelake_assets.orchestration.names import table_asset_key
from icelake_assets.orchestration.project import MAINTENANCE_JOB, RunSelection
from icelake_assets.private_api import IMPLICIT_ASSET_JOB_NAME
from icelake_assets_tests.conftest import catalog_name

MODULE = "icelake_assets.definitions"
ROOT = Path(__file__).resolve().parents[1]
# The run worker's command with Python's logging on, so the definitions' INFO line reaches stderr.
WORKER = "import logging, sys; logging.basicConfig(level=logging.INFO); from dagster._cli import main; main()"


def _lake(make_lake, tmp_path, monkeypatch):
    settings = make_lake()
    refs = build_demo_lake(settings, catalog=catalog_name(settings), scale="test")
    monkeypatch.setenv("ICELAKE_CONFIG", settings.source)
    monkeypatch.setenv(inventory.INVENTORY_ENV, str(tmp_path / "inventory.json"))
    monkeypatch.setattr(definitions, "_BUILT", {})
    return settings, refs


def _reconstruction(path: str) -> DefinitionsLoadContext:
    recorded = {project.INVENTORY_METADATA_KEY: f'{{"path": "{path}"}}'}
    return DefinitionsLoadContext(
        DefinitionsLoadType.RECONSTRUCTION,
        repository_load_data=RepositoryLoadData(cacheable_asset_data={}, reconstruction_metadata=recorded),
    )


def test_the_code_server_records_its_inventory_where_run_workers_read_it(make_lake, tmp_path, monkeypatch):
    _lake(make_lake, tmp_path, monkeypatch)
    repo = load_repository(MODULE)  # Dagster's code-server loader
    assert repo.repository_load_data is not None
    recorded = repo.repository_load_data.reconstruction_metadata[project.INVENTORY_METADATA_KEY]
    assert str(tmp_path / "inventory.json") in str(recorded)


def test_a_run_of_one_table_builds_its_pool_with_the_code_servers_ops(make_lake, tmp_path, monkeypatch):
    settings, refs = _lake(make_lake, tmp_path, monkeypatch)
    full = load_repository(MODULE)
    key = next(
        k for k in full.get_job(MAINTENANCE_JOB).asset_layer.executable_asset_keys if k != OVERVIEW_KEY
    )
    context = _reconstruction(str(tmp_path / "inventory.json"))
    partial = project.load_definitions(context, RunSelection("r1", MAINTENANCE_JOB, frozenset({key})))
    repo = partial.get_repository_def()
    # A run worker needs no sensor or schedule (Dagster adds its default automation sensor anyway).
    assert full.sensor_defs and not {s.name for s in repo.sensor_defs} & {s.name for s in full.sensor_defs}
    assert not repo.schedule_defs
    built = {k for k in repo.asset_graph.get_all_asset_keys() if k != OVERVIEW_KEY}
    assert key in built and len(built) < len(refs)  # the demo's tables fall into several pools
    ops = lambda r: {  # noqa: E731
        str(h) for h in r.get_maybe_subset_job_def(MAINTENANCE_JOB, asset_selection={key}).graph.node_dict
    }
    assert ops(repo) == ops(full)
    # A run that selects the lake-wide overview (not a table): everything, sensors included.
    whole = project.load_definitions(context, RunSelection("r2", MAINTENANCE_JOB, frozenset({OVERVIEW_KEY})))
    assert whole.sensors


def _steps(repo, job: str, key) -> list[str]:
    """The steps a run of ``job`` selecting the table ``key`` executes."""
    return sorted(
        create_execution_plan(repo.get_maybe_subset_job_def(job, asset_selection={key})).step_keys_to_execute
    )


def test_every_tables_partial_build_plans_the_steps_and_partitions_of_the_full_one(
    make_lake, tmp_path, monkeypatch
):
    """Partitioned tables too (their own maintenance job, and Dagster's implicit job of backfills):
    whatever a run of one table would execute, the partial build plans it step for step."""
    settings, refs = _lake(make_lake, tmp_path, monkeypatch)
    full = load_repository(MODULE)
    tables = inventory.read(settings, tmp_path / "inventory.json", any_age=True)
    assert tables is not None
    partial_builds = 0
    for ref in refs:
        key = table_asset_key(ref)
        partial = project.build_run_definitions(settings, tables.tables, {key})
        if partial is None:  # a group with producers (lineage): the worker builds everything
            continue
        partial_builds += 1
        repo = partial.get_repository_def()
        jobs = [j.name for j in full.get_all_jobs() if key in j.asset_layer.executable_asset_keys]
        assert IMPLICIT_ASSET_JOB_NAME in jobs
        for job in jobs:
            assert _steps(repo, job, key) == _steps(full, job, key), (ref, job)
        assert repo.asset_graph.get(key).partitions_def == full.asset_graph.get(key).partitions_def
    assert partial_builds >= 2


def test_a_real_run_worker_maintains_its_table_from_the_partial_definitions(make_lake, tmp_path, monkeypatch):
    settings, refs = _lake(make_lake, tmp_path, monkeypatch)
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text("")
    ref = refs[0]
    key = table_asset_key(ref)
    repo = load_repository(MODULE)
    job = next(
        j.name
        for j in repo.get_all_jobs()
        if key in j.asset_layer.executable_asset_keys and j.name.startswith(MAINTENANCE_JOB)
    )
    with DagsterInstance.from_config(str(home)) as instance:
        run_id, command = prepare_run(MODULE, job, list(key.path), instance)
        worker = subprocess.run(
            [sys.executable, "-c", WORKER, *command[3:]],
            env={**os.environ, "DAGSTER_HOME": str(home)},
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=900,
        )
        run = instance.get_run_by_id(run_id)
        assert run is not None and run.status == DagsterRunStatus.SUCCESS, worker.stderr[-4000:]
        assert (
            f"run {run_id}: definitions of" in worker.stderr and "its 1 selected tables only" in worker.stderr
        )
        done = instance.fetch_materializations(key, limit=1).records
        assert done and done[0].run_id == run_id
        checks = instance.get_records_for_run(run_id, of_type=DagsterEventType.ASSET_CHECK_EVALUATION).records
        evaluated = {r.event_log_entry.dagster_event.event_specific_data.asset_key for r in checks}
        assert evaluated == {key}  # its post-run checks ran in the same run


def test_a_lake_past_the_auto_checks_bound_carries_summary_checks_in_its_run_workers_too(
    make_lake, tmp_path, monkeypatch
):
    """``automation.checks_per_table: auto`` (the default) picks the checks by the whole lake's size: a
    run worker, which builds a few of its tables, plans the checks the code server showed (a worker
    counting its own tables would plan every check and Dagster would refuse the run's plan)."""
    settings = make_lake(extra={"automation": {"checks_each_max_tables": 2}})
    refs = build_demo_lake(settings, catalog=catalog_name(settings), scale="test")
    assert len(refs) > 2
    monkeypatch.setenv("ICELAKE_CONFIG", settings.source)
    monkeypatch.setenv(inventory.INVENTORY_ENV, str(tmp_path / "inventory.json"))
    monkeypatch.setattr(definitions, "_BUILT", {})
    full = load_repository(MODULE)
    checks = lambda r, key: {  # noqa: E731
        k.name for k in r.asset_graph.asset_check_keys if k.asset_key == key
    }
    key = table_asset_key(refs[0])
    assert checks(full, key) == {"health", "orphan_files"}
    tables = inventory.read(settings, tmp_path / "inventory.json", any_age=True)
    assert tables is not None
    partial = project.build_run_definitions(settings, tables.tables, {key})
    assert partial is not None
    repo = partial.get_repository_def()
    assert checks(repo, key) == checks(full, key)
    job = next(
        j.name
        for j in full.get_all_jobs()
        if key in j.asset_layer.executable_asset_keys and j.name.startswith(MAINTENANCE_JOB)
    )
    assert _steps(repo, job, key) == _steps(full, job, key)
