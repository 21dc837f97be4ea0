"""Shared by the partition tests: values that need quoting or escaping, hand-made layouts, and a
SQLite-catalog lake (pyiceberg only) for layouts of real tables."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pytest

from icelake_assets.catalog.connection import open_catalog
from icelake_assets.partitions.layout import LayoutField, PartitionLayout
from icelake_assets_tests.conftest import catalog_name, new_lake

TRICKY = [
    'it\'s "quoted" \\ back',
    "DROP TABLE t; -- SELECT * FROM x WHERE 1=1",
    "Ünïcødé ☕ 東京",
    "a|b...c",
    "~tilde",
    "null",
    "",
    " padded ",
    None,
]


def layout_field(name, transform, source_type, source=None, source_id=1, earliest=None) -> LayoutField:
    return LayoutField(name, source_id, (source or name.split("_")[0],), source_type, transform, earliest)


def one_spec_layout(*fields: LayoutField) -> PartitionLayout:
    return PartitionLayout("ns.t", 0, fields, {0: fields}, (0,))


@pytest.fixture(scope="module")
def lake(tmp_path_factory):
    settings = new_lake(tmp_path_factory, thresholds={"small_files": {"max_files_per_partition": 2}})
    Path(settings.catalogs[catalog_name(settings)]["uri"][len("sqlite:///") :]).parent.mkdir(
        parents=True, exist_ok=True
    )
    cat = open_catalog(settings, catalog_name(settings), create=True)
    cat.create_namespace("ns")
    return settings, cat


def timestamps(*days_hours):
    return pa.array(
        [datetime(2024, 1, d, h, tzinfo=UTC) for d, h in days_hours], pa.timestamp("us", tz="UTC")
    )
