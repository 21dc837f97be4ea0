"""The Dagster user's path with the real tools (docs/embedding.md, issue 32): the product's wheel built
from this tree and installed into a fresh venv (its dependencies are .venv's, through a .pth, so
nothing but the product comes from the wheel), `create-dagster project`, `dg scaffold defs` of the
Component, `dg check defs`, `dg list defs --json`, `dg launch` of the health-check job, and the
factory example of the docs, verbatim, under `dg check defs` and `dagster definitions validate`.

A created project is made importable as `pip install -e .` of it would (a .pth naming its src/):
its build backend (hatchling) is not among .venv's packages."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from dagster import DagsterEventType, DagsterInstance, DagsterRunStatus

from icelake_assets.catalog.connection import open_catalog
from icelake_assets.settings import Settings, load_settings
from icelake_assets_tests.conftest import catalog_name, new_lake
from icelake_assets_tests.orchestration.sensors.test_maintenance import SCHEMA, _batch, _lake

ROOT = Path(__file__).resolve().parents[1]
COMPONENT = "icelake_assets.embedding.IcelakeComponent"
# Console scripts of .venv whose entry points the fresh venv runs with its own interpreter.
TOOLS = ("dg", "dagster", "create-dagster")


@dataclass(frozen=True)
class UserVenv:
    site_packages: Path
    wheel: Path
    env: dict[str, str]

    def run(self, *args: str, cwd: Path, timeout: int = 300) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            list(args), cwd=cwd, env=self.env, capture_output=True, text=True, timeout=timeout
        )
        assert done.returncode == 0, f"{args}:\n{done.stdout[-4000:]}\n{done.stderr[-6000:]}"
        return done

    def project(self, parent: Path, name: str) -> Path:
        """`create-dagster project NAME --no-uv-sync`, made importable as an editable install."""
        self.run("create-dagster", "project", name, "--no-uv-sync", cwd=parent)
        root = parent / name
        (self.site_packages / f"__editable__{name}.pth").write_text(str(root / "src") + "\n")
        return root


@pytest.fixture(scope="module")
def user_venv(tmp_path_factory) -> UserVenv:
    work = tmp_path_factory.mktemp("user")
    # The build reads a copy of the tree, tests included: the wheel must leave them out by itself.
    source = _mkdir(work / "source")
    for name in ("pyproject.toml", "setup.cfg", "README.md"):
        shutil.copy(ROOT / name, source / name)
    for package in ("icelake_assets", "icelake_assets_tests"):
        shutil.copytree(
            ROOT / package, source / package, ignore=shutil.ignore_patterns("__pycache__", "*.pyc")
        )
    wheels = work / "wheels"
    pip = [sys.executable, "-m", "pip"]
    # As a user builds it: in pip's isolated build environment (setuptools from the package index).
    subprocess.run([*pip, "wheel", "-q", "--no-deps", "-w", str(wheels), str(source)], check=True)
    [wheel] = wheels.glob("icelake_assets-*.whl")

    venv = work / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    subprocess.run([*pip, "--python", str(python), "install", "-q", "--no-deps", str(wheel)], check=True)
    site = venv / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"
    # .venv's packages after the venv's own; .pth files there (the editable product's) are not run.
    (site / "_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    for tool in TOOLS:
        script = Path(sys.executable).parent / tool
        lines = script.read_text().splitlines(keepends=True)
        (venv / "bin" / tool).write_text(f"#!{python}\n" + "".join(lines[1:]))
        (venv / "bin" / tool).chmod(0o755)

    home = _mkdir(work / "dagster_home")
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    env = {
        **os.environ,
        "PATH": f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}",
        "VIRTUAL_ENV": str(venv),
        "DAGSTER_HOME": str(home),
        "DAGSTER_DG_UPDATE_CHECK_ENABLED": "0",  # create-dagster asks PyPI for a newer version
    }
    env.pop("PYTHONPATH", None)
    return UserVenv(site, wheel, env)


def _mkdir(path: Path) -> Path:
    path.mkdir(parents=True)
    return path


@pytest.fixture(scope="module")
def lake(tmp_path_factory) -> Settings:
    """A lake with one table `ns.t` of 25 small files."""
    settings, _, _ = _lake(lambda thresholds=None, extra=None: new_lake(tmp_path_factory, thresholds, extra))
    return settings


def _own_warnings(output: str) -> list[str]:
    """Warnings raised from the product's code (Dagster's for dagster-spark's Component are not)."""
    return [line for line in output.splitlines() if "Warning" in line and "/icelake_assets/" in line]


def test_the_wheel_installs_the_product_only(user_venv, tmp_path):
    names = zipfile.ZipFile(user_venv.wheel).namelist()
    assert "icelake_assets/embedding.py" in names and "icelake_assets/scaffold.py" in names
    assert not [n for n in names if n.startswith("icelake_assets_tests")]
    installed = {p.name for p in user_venv.site_packages.iterdir()}
    assert "icelake_assets" in installed and "icelake_assets_tests" not in installed

    assert "demo-lake" in user_venv.run("icelake", "--help", cwd=tmp_path).stdout
    where = user_venv.run(
        "python",
        "-c",
        "import importlib.util, icelake_assets; "
        "print(icelake_assets.__file__); print(importlib.util.find_spec('icelake_assets_tests'))",
        cwd=tmp_path,
    ).stdout.split()
    assert where == [str(user_venv.site_packages / "icelake_assets" / "__init__.py"), "None"]
    listed = user_venv.run("dg", "list", "components", "--json", cwd=tmp_path).stdout
    assert COMPONENT in {c["key"] for c in json.loads(listed)["items"]}


@pytest.fixture(scope="module")
def starter(user_venv, tmp_path_factory) -> Path:
    """A created project with the Component scaffolded as it comes: no parameter, no edit."""
    root = user_venv.project(tmp_path_factory.mktemp("starter"), "starter_shop")
    user_venv.run("dg", "scaffold", "defs", COMPONENT, "icelake", cwd=root)
    return root / "src" / "starter_shop" / "defs" / "icelake"


def test_the_scaffolded_component_passes_dg_check_defs_with_no_edit(user_venv, starter):
    assert yaml.safe_load((starter / "defs.yaml").read_text()) == {
        "type": COMPONENT,
        "attributes": {"config": "icelake.yaml"},
    }
    settings = load_settings(starter / "icelake.yaml")
    assert settings.catalogs["demo"]["type"] == "sql" and settings.policies.catalogs["demo"].mode == "propose"
    checked = user_venv.run("dg", "check", "defs", cwd=starter.parents[3])
    assert "All definitions loaded successfully" in checked.stdout + checked.stderr
    assert not _own_warnings(checked.stdout + checked.stderr)


def test_dg_lists_and_launches_the_starter_once_its_catalog_has_a_table(user_venv, starter):
    """The starter's local catalog, given a table of 25 small files by the user's own writer: `dg list
    defs --json` shows the product's definitions for it and `dg launch` runs the health checks."""
    settings = load_settings(starter / "icelake.yaml")
    (starter.parents[3] / ".lake" / "warehouse").mkdir(parents=True)
    catalog = open_catalog(settings, "demo", create=True)
    catalog.create_namespace("sales")
    orders = catalog.create_table(("sales", "orders"), SCHEMA)
    for i in range(25):
        orders.append(_batch(i * 10, 10))

    root = starter.parents[3]
    listed = user_venv.run("dg", "list", "defs", "--json", cwd=root)
    assert not _own_warnings(listed.stdout + listed.stderr)
    defs = json.loads(listed.stdout)
    table = "demo/sales/orders"
    assert table in {a["asset_key"] for a in defs["assets"]}
    checks = {c["name"] for c in defs["asset_checks"] if c["asset_key"] == table}
    assert {"health", "small_files", "orphan_files", "manifest_fragmentation"} <= checks
    assert {"icelake_health_checks", "icelake_maintenance"} <= {j["name"] for j in defs["jobs"]}
    assert {"icelake_maintenance_sensor", "icelake_health_sensor"} <= {s["name"] for s in defs["sensors"]}
    assert {r["name"] for r in defs["resources"]} == {
        "icelake",
        "icelake_spark",
        "icelake_run_state_io_manager",
    }

    user_venv.run("dg", "launch", "--job", "icelake_health_checks", cwd=root)
    with DagsterInstance.from_config(user_venv.env["DAGSTER_HOME"]) as instance:
        [run] = [r for r in instance.get_runs() if r.job_name == "icelake_health_checks"]
        assert run.status == DagsterRunStatus.SUCCESS
        evaluations = instance.all_logs(run.run_id, of_type=DagsterEventType.ASSET_CHECK_EVALUATION)
        evaluated = {
            e.get_dagster_event().event_specific_data.asset_key.to_user_string() for e in evaluations
        }
        assert table in evaluated


def _docs_factory_example() -> str:
    docs = (ROOT / "docs" / "embedding.md").read_text()
    section = docs[docs.index("## As a function") :]
    [block] = re.findall(r"```python\n(.*?)```", section, re.S)[:1]
    return block


def test_the_factory_example_of_the_docs_loads_verbatim(user_venv, lake, tmp_path):
    root = user_venv.project(tmp_path, "factory_shop")
    package = root / "src" / "factory_shop"
    (package / "definitions.py").write_text(_docs_factory_example())
    name = catalog_name(lake)
    (package / "icelake.yaml").write_text(yaml.safe_dump({"catalogs": {name: lake.catalog_properties(name)}}))
    # From the project root: the relative "icelake.yaml" of the example is read beside definitions.py.
    checked = user_venv.run("dg", "check", "defs", cwd=root)
    validated = user_venv.run("dagster", "definitions", "validate", cwd=root)
    for done in (checked, validated):
        output = done.stdout + done.stderr
        assert "left out of the code location" not in output  # the lake was reached: its table loaded
        assert not _own_warnings(output)
    assert "Validation successful" in validated.stdout + validated.stderr
