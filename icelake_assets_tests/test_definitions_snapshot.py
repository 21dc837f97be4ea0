"""What users see in Dagster for the demo lake (assets, checks, jobs, schedules, sensors), compared with
a stored snapshot so a change of names, keys, deps, groups, kinds, tags or partitions shows in review.

Regenerate after an intended change, then review the diff of the JSON file:
    ICELAKE_UPDATE_SNAPSHOTS=1 python -m pytest -q icelake_assets_tests/test_definitions_snapshot.py
"""

import json
import os
from pathlib import Path
from typing import Any

import yaml
from dagster import Definitions

from icelake_assets.demo.lake import build_demo_lake
from icelake_assets.orchestration.project import build_definitions
from icelake_assets.settings import load_settings

ROOT = Path(__file__).resolve().parents[1]
SNAPSHOT = Path(__file__).parent / "snapshots" / "demo_definitions.json"


def _partitions(spec_or_def: Any) -> str | None:
    pd = getattr(spec_or_def, "partitions_def", None)
    if pd is None:
        return None
    # The kind and dimensions, not the keys: time windows start at the demo data's (moving) dates.
    dims = getattr(pd, "partitions_defs", None)
    if dims:
        return " x ".join(f"{d.name}:{type(d.partitions_def).__name__}" for d in dims)
    return type(pd).__name__


def describe(defs: Definitions) -> dict[str, Any]:
    graph = defs.resolve_asset_graph()
    assets = {}
    for spec in sorted(defs.resolve_all_asset_specs(), key=lambda s: s.key.to_user_string()):
        assets[spec.key.to_user_string()] = {
            "group": spec.group_name,
            "kinds": sorted(spec.kinds),
            "tags": {k: v for k, v in sorted(spec.tags.items()) if not k.startswith("dagster/kind/")},
            "owners": sorted(spec.owners),
            "deps": sorted(d.asset_key.to_user_string() for d in spec.deps),
            "partitions": _partitions(spec),
            "executable": graph.get(spec.key).is_executable,
        }
    checks = sorted(f"{k.asset_key.to_user_string()}:{k.name}" for k in graph.asset_check_keys)
    jobs = sorted(j.name for j in defs.jobs or ())
    schedules = {
        s.name: {
            "cron": s.cron_schedule,
            "job": s.job_name,
            "timezone": s.execution_timezone,
            "default_status": s.default_status.value,
        }
        for s in sorted(defs.schedules or (), key=lambda s: s.name)
    }
    sensors = {
        s.name: {
            "jobs": sorted(j.name for j in s.jobs) if s.has_jobs else [],
            "minimum_interval_seconds": s.minimum_interval_seconds,
            "default_status": s.default_status.value,
        }
        for s in sorted(defs.sensors or (), key=lambda s: s.name)
    }
    return {
        "assets": assets,
        "asset_checks": checks,
        "jobs": jobs,
        "schedules": schedules,
        "sensors": sensors,
    }


def demo_definitions(tmp_path: Path) -> Definitions:
    """The project's icelake.yaml (policies, automation), its catalog moved into tmp_path."""
    data = yaml.safe_load((ROOT / "icelake.yaml").read_text())
    data["catalogs"]["demo"].update(uri="sqlite:///lake/catalog.db", warehouse="lake/warehouse")
    (tmp_path / "lake" / "warehouse").mkdir(parents=True)
    (tmp_path / "icelake.yaml").write_text(yaml.safe_dump(data))
    settings = load_settings(tmp_path / "icelake.yaml")
    build_demo_lake(settings, scale="test")
    return build_definitions(settings)


def test_demo_definitions_match_the_snapshot(tmp_path):
    seen = describe(demo_definitions(tmp_path))
    text = json.dumps(seen, indent=2, sort_keys=True) + "\n"
    if os.environ.get("ICELAKE_UPDATE_SNAPSHOTS"):
        SNAPSHOT.write_text(text)
    assert SNAPSHOT.exists(), f"no snapshot yet: run with ICELAKE_UPDATE_SNAPSHOTS=1 to write {SNAPSHOT}"
    assert json.loads(SNAPSHOT.read_text()) == seen, (
        f"the definitions users see changed: review, then regenerate {SNAPSHOT.name} "
        "(ICELAKE_UPDATE_SNAPSHOTS=1, see this module's docstring)"
    )
