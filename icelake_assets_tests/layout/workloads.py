"""A table whose layout the recorded scans can improve, and its reports: ``ns.clicks`` written in
arrival order (every file holds most users), scanned by ``user = ?``."""

from __future__ import annotations

import random
from typing import Any

import pyarrow as pa

from icelake_assets.catalog.connection import TableRef, open_catalog
from icelake_assets.layout.reports import ScanReport
from icelake_assets.settings import Settings
from icelake_assets_tests.conftest import catalog_name, new_lake

SCHEMA = pa.schema([("id", pa.int64()), ("user", pa.string())])
BY_USER = {"type": "eq", "term": "user", "value": "(hash-1a2b3c4d)"}


def clicks_lake(
    tmp_path_factory, thresholds: dict[str, Any] | None = None, extra: dict[str, Any] | None = None
) -> tuple[Settings, TableRef, int]:
    """``ns.clicks``: 10 appends of 1,000 rows, users at random; its target size a tenth of its bytes
    (the replay cuts its sample into 10 files). Returns the settings, the table and its bytes."""
    settings = new_lake(tmp_path_factory, thresholds, extra)
    name = catalog_name(settings)
    catalog = open_catalog(settings, name, create=True)
    catalog.create_namespace("ns")
    table = catalog.create_table(("ns", "clicks"), schema=SCHEMA)
    rng = random.Random(5)
    for n in range(10):
        ids = range(n * 1000, n * 1000 + 1000)
        table.append(
            pa.table({"id": list(ids), "user": [f"u{rng.randrange(300)}" for _ in ids]}, schema=SCHEMA)
        )
    size = int(catalog.load_table(("ns", "clicks")).current_snapshot().summary["total-files-size"])
    catalog.load_table(("ns", "clicks")).transaction().set_properties(
        {"write.target-file-size-bytes": str(size // 10 + 1)}
    ).commit_transaction()
    return settings, TableRef(name, ("ns",), "clicks"), size


def user_scans(ref: TableRef, size: int, n: int = 20) -> list[ScanReport]:
    """``n`` scans by ``user = ?`` that read every file (the table's arrival order skips none)."""
    return [
        ScanReport(
            str(ref),
            1,
            BY_USER,
            0,
            projected_field_names=("user",),
            result_data_files=10,
            total_file_size_bytes=size,
        )
        for _ in range(n)
    ]
