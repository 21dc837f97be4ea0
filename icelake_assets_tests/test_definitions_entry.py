"""definitions.py builds the code location once per process: the code server's reconstruction call,
which carries what its initialization recorded, gets that build instead of a second one (issue 24)."""

from __future__ import annotations

from dagster import DagsterRun
from dagster._core.definitions.definitions_load_context import DefinitionsLoadContext, DefinitionsLoadType
from dagster._core.definitions.repository_definition.repository_definition import RepositoryLoadData

from icelake_assets import definitions
from icelake_assets.catalog import inventory
from icelake_assets.demo.lake import build_demo_lake
from icelake_assets.orchestration import project
from icelake_assets.orchestration.names import table_asset_key
from icelake_assets_tests.conftest import catalog_name


def _load(context: DefinitionsLoadContext):
    DefinitionsLoadContext.set(context)
    try:
        return definitions.defs()
    finally:
        DefinitionsLoadContext.set(DefinitionsLoadContext(DefinitionsLoadType.INITIALIZATION))


def test_one_build_serves_initialization_and_the_matching_reconstruction(make_lake, tmp_path, monkeypatch):
    settings = make_lake()
    monkeypatch.setenv("ICELAKE_CONFIG", settings.source)
    monkeypatch.setenv(inventory.INVENTORY_ENV, str(tmp_path / "inventory.json"))
    monkeypatch.setattr(definitions, "_BUILT", {})
    builds = []
    real = definitions.load_definitions
    monkeypatch.setattr(
        definitions, "load_definitions", lambda c, run=None: builds.append(c.load_type) or real(c, run)
    )

    first = _load(DefinitionsLoadContext(DefinitionsLoadType.INITIALIZATION))
    recorded = {project.INVENTORY_METADATA_KEY: first.metadata[project.INVENTORY_METADATA_KEY]}
    again = _load(
        DefinitionsLoadContext(
            DefinitionsLoadType.RECONSTRUCTION,
            repository_load_data=RepositoryLoadData(
                cacheable_asset_data={}, reconstruction_metadata=recorded
            ),
        )
    )
    assert again is first and builds == [DefinitionsLoadType.INITIALIZATION]
    # What Dagster's code server really sends on its second call: a reconstruction without metadata.
    bare = _load(
        DefinitionsLoadContext(
            DefinitionsLoadType.RECONSTRUCTION,
            repository_load_data=RepositoryLoadData(cacheable_asset_data={}, reconstruction_metadata={}),
        )
    )
    assert bare is first and builds == [DefinitionsLoadType.INITIALIZATION]
    # A reconstruction from another inventory (another code server's) is built on its own.
    other = {project.INVENTORY_METADATA_KEY: '{"path": "/elsewhere/inventory.json"}'}
    _load(
        DefinitionsLoadContext(
            DefinitionsLoadType.RECONSTRUCTION,
            repository_load_data=RepositoryLoadData(cacheable_asset_data={}, reconstruction_metadata=other),
        )
    )
    assert builds == [DefinitionsLoadType.INITIALIZATION, DefinitionsLoadType.RECONSTRUCTION]


def _reconstruction(metadata: dict[str, str]) -> DefinitionsLoadContext:
    return DefinitionsLoadContext(
        DefinitionsLoadType.RECONSTRUCTION,
        repository_load_data=RepositoryLoadData(cacheable_asset_data={}, reconstruction_metadata=metadata),
    )


def test_a_build_for_one_run_answers_only_that_run(make_lake, tmp_path, monkeypatch):
    """A run worker's partial build (its run's table groups) never answers another load of the
    process: a reconstruction without the run gets the whole code location."""
    settings = make_lake()
    refs = build_demo_lake(settings, catalog=catalog_name(settings), scale="test")
    path = tmp_path / "inventory.json"
    monkeypatch.setenv("ICELAKE_CONFIG", settings.source)
    monkeypatch.setenv(inventory.INVENTORY_ENV, str(path))
    monkeypatch.setattr(definitions, "_BUILT", {})
    inventory.load_inventory(settings)  # the code server's inventory file
    run = DagsterRun(
        job_name=project.MAINTENANCE_JOB, run_id="r1", asset_selection=frozenset({table_asset_key(refs[-1])})
    )
    monkeypatch.setattr(definitions, "run_being_loaded", lambda: run)
    partial = _load(_reconstruction({project.INVENTORY_METADATA_KEY: f'{{"path": "{path}"}}'}))
    assert not partial.sensors  # built for the run only
    monkeypatch.setattr(definitions, "run_being_loaded", lambda: None)
    whole = _load(_reconstruction({}))
    assert whole is not partial and whole.sensors
