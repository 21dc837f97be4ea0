"""A normal load of the product's definitions raises no warning of the product's own making (issue 32
item 5): Dagster's preview and deprecation warnings on calls the product makes would print on every
code-location load (daemon, code server, `dg`)."""

from __future__ import annotations

import warnings

from dagster import AssetKey

from icelake_assets.catalog import inventory
from icelake_assets.embedding import icelake_definitions
from icelake_assets.orchestration import project
from icelake_assets.private_api import DefinitionsLoadContext, DefinitionsLoadType
from icelake_assets_tests.conftest import catalog_name
from icelake_assets_tests.orchestration.sensors.test_maintenance import _lake


def test_loads_raise_no_warning_from_the_products_code(make_lake, tmp_path, monkeypatch):
    settings, ref, _ = _lake(make_lake, files=2)
    monkeypatch.setenv("ICELAKE_CONFIG", settings.source)
    # With a cached inventory the stand-alone load records it in the reconstruction metadata.
    monkeypatch.setenv(inventory.INVENTORY_ENV, str(tmp_path / "inventory.json"))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        standalone = project.load_definitions(DefinitionsLoadContext(DefinitionsLoadType.INITIALIZATION))
        embedded = icelake_definitions(settings.source)
    assert project.INVENTORY_METADATA_KEY in (standalone.metadata or {})
    key = AssetKey([catalog_name(settings), "ns", "t"])
    assert standalone.resolve_assets_def(key) and embedded.resolve_assets_def(key)
    ours = [
        f"{w.filename}:{w.lineno}: {w.category.__name__}: {w.message}"
        for w in caught
        if "/icelake_assets/" in w.filename
    ]
    assert ours == []
