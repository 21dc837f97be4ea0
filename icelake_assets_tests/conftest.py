"""Shared fixtures: a real SQLite SQL catalog per test lake, one real Spark session per test process.

Spark's getOrCreate reuses the live session, so every lake gets its own catalog name; the Spark
resource registers a new catalog on the live session at runtime (see IcebergSparkResource)."""

from __future__ import annotations

import itertools
import os
from pathlib import Path
from typing import Any, Callable

import pytest
import yaml

from icelake_assets.maintenance.spark_session import spark_config
from icelake_assets.orchestration.resources import IcebergSparkResource
from icelake_assets.settings import Settings, load_settings

_LAKES = itertools.count()

# Thresholds scaled to the demo lake's "test" size (the defaults are sized for production tables).
TEST_THRESHOLDS: dict[str, Any] = {
    "small_files": {"max_files_per_partition": 20},
    # The test lakes' snapshots are seconds old: min_age_hours 0 lets expiry act on them (tests of the
    # default minimum age set their own thresholds).
    "snapshots": {"max_count": 20, "min_keep": 5, "min_age_hours": 0},
    "manifests": {"max_count": 10},
}


def write_settings(folder: Path, catalog: str, thresholds: dict[str, Any] | None = None,
                   extra: dict[str, Any] | None = None) -> Path:
    data: dict[str, Any] = {
        "catalogs": {catalog: {"type": "sql", "uri": "sqlite:///lake/catalog.db", "warehouse": "lake/warehouse"}},
        "thresholds": thresholds if thresholds is not None else TEST_THRESHOLDS,
        **(extra or {}),
    }
    path = folder / "icelake.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def new_lake(tmp_path_factory, thresholds: dict[str, Any] | None = None,
             extra: dict[str, Any] | None = None) -> Settings:
    """A new lake folder with its own catalog name; returns its Settings (source = the YAML file)."""
    folder = tmp_path_factory.mktemp("lake")
    name = f"lake{next(_LAKES)}_{os.getpid()}"
    (folder / "lake" / "warehouse").mkdir(parents=True)
    return load_settings(write_settings(folder, name, thresholds, extra))


def catalog_name(settings: Settings) -> str:
    return next(iter(settings.catalogs))


@pytest.fixture
def make_lake(tmp_path_factory) -> Callable[..., Settings]:
    return lambda thresholds=None, extra=None: new_lake(tmp_path_factory, thresholds, extra)


@pytest.fixture
def spark_for(request) -> Callable[[Settings], Any]:
    """The process's Spark session with the lake's catalog registered."""

    def get(settings: Settings):
        return IcebergSparkResource(spark_config=spark_config(settings)).spark_session

    return get
