"""definitions.py builds the code location once per process: the code server's reconstruction call,
which carries what its initialization recorded, gets that build instead of a second one (issue 24)."""

from __future__ import annotations

from dagster._core.definitions.definitions_load_context import DefinitionsLoadContext, DefinitionsLoadType
from dagster._core.definitions.repository_definition.repository_definition import RepositoryLoadData

from icelake_assets import definitions
from icelake_assets.catalog import inventory
from icelake_assets.orchestration import project


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
