"""The Component's scaffolder (scaffold.py), called as `dg scaffold defs` calls it (a ScaffoldRequest
whose parameters come from JSON); the `dg` command itself runs in test_embedding_dg.py."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest
import yaml
from dagster import AssetKey, load_from_defs_folder
from dagster.components import ScaffoldRequest

from icelake_assets.scaffold import IcelakeScaffolder, IcelakeScaffoldParams
from icelake_assets.settings import load_settings
from icelake_assets_tests.conftest import catalog_name
from icelake_assets_tests.orchestration.sensors.test_maintenance import _lake
from icelake_assets_tests.test_embedding import SHOP_PYPROJECT

COMPONENT = "icelake_assets.embedding.IcelakeComponent"


def _project(root: Path) -> Path:
    """A project as `create-dagster project shop` lays it out; returns its defs folder."""
    (root / "src" / "shop" / "defs").mkdir(parents=True)
    (root / "pyproject.toml").write_text(SHOP_PYPROJECT)
    for package in ("shop", "shop/defs"):
        (root / "src" / package / "__init__.py").write_text("")
    return root / "src" / "shop" / "defs"


def _scaffold(root: Path, params: str = "{}", scaffold_format: str = "yaml") -> Path:
    folder = _project(root) / "icelake"
    folder.mkdir()  # dg makes the folder, then calls the scaffolder
    request = ScaffoldRequest(
        type_name=COMPONENT,
        target_path=folder,
        scaffold_format=scaffold_format,  # type: ignore[arg-type]
        project_root=root,
        params=IcelakeScaffoldParams.model_validate_json(params),
    )
    IcelakeScaffolder().scaffold(request)
    return folder


def test_the_starter_is_a_local_catalog_in_the_projects_lake_folder_in_propose_mode(tmp_path):
    folder = _scaffold(tmp_path)
    assert yaml.safe_load((folder / "defs.yaml").read_text()) == {
        "type": COMPONENT,
        "attributes": {"config": "icelake.yaml"},
    }
    text = (folder / "icelake.yaml").read_text()
    settings = load_settings(folder / "icelake.yaml")
    assert settings.catalogs == {
        "demo": {
            "type": "sql",
            "uri": f"sqlite:///{tmp_path / '.lake' / 'catalog.db'}",
            "warehouse": (tmp_path / ".lake" / "warehouse").as_uri(),
        }
    }
    assert settings.policies.catalogs["demo"].mode == "propose"
    # The command that fills it, as typed from the project's root.
    assert "icelake --config src/shop/defs/icelake/icelake.yaml demo-lake --scale test" in text


def test_scaffold_parameters_write_the_users_catalog_and_mode(tmp_path, monkeypatch):
    params = (
        '{"catalog": "lake", "mode": "observe", "catalog_properties": {"type": "rest", '
        '"uri": "https://catalog.example.com/api", "credential": "${LAKE_CREDENTIAL}"}}'
    )
    folder = _scaffold(tmp_path, params)
    monkeypatch.setenv("LAKE_CREDENTIAL", "id:secret")
    settings = load_settings(folder / "icelake.yaml")
    assert settings.catalogs == {
        "lake": {"type": "rest", "uri": "https://catalog.example.com/api", "credential": "id:secret"}
    }
    assert settings.policies.catalogs["lake"].mode == "observe"
    assert "demo-lake" not in (folder / "icelake.yaml").read_text()


def test_a_literal_secret_is_refused_unechoed_and_nothing_is_written(tmp_path):
    params = '{"catalog": "lake", "catalog_properties": {"type": "rest", "token": "s3cr3t"}}'
    with pytest.raises(ValueError, match=r"catalogs\.lake\.token: a literal secret") as refused:
        _scaffold(tmp_path, params)
    assert "s3cr3t" not in str(refused.value)
    assert not (tmp_path / "src" / "shop" / "defs" / "icelake").exists()


def test_the_python_format_loads_with_its_settings_beside_it(make_lake, tmp_path, monkeypatch):
    settings, _, _ = _lake(make_lake, files=2)
    name = catalog_name(settings)
    params = IcelakeScaffoldParams(catalog=name, catalog_properties=settings.catalog_properties(name))
    folder = _scaffold(tmp_path, params.model_dump_json(), "python")
    assert not (folder / "defs.yaml").exists() and (folder / "component.py").exists()
    monkeypatch.syspath_prepend(str(tmp_path / "src"))
    for module in [m for m in sys.modules if m == "shop" or m.startswith("shop.")]:
        del sys.modules[module]
    importlib.invalidate_caches()
    defs = load_from_defs_folder(path_within_project=folder.parent)
    assert defs.resolve_assets_def(AssetKey([name, "ns", "t"])) is not None
