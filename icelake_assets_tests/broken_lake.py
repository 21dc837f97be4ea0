"""A lake with faults that must stay their own (issue 19), built from real components: SQLite SQL
catalogs (pyiceberg), a PostgreSQL catalog on a port nothing listens on (its password from the
environment, as the settings require), a SQLite catalog whose folder does not exist, a table whose
metadata.json is truncated and one whose manifest list is not Avro (its metadata.json is fine: it is
discovered, and fails when its manifests are read)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
import yaml

from icelake_assets.catalog.connection import TableRef, open_catalog
from icelake_assets.demo.lake import local_path
from icelake_assets.settings import Settings, load_settings
from icelake_assets_tests.conftest import TEST_THRESHOLDS
from icelake_assets_tests.servers import free_port

PASSWORD_ENV = "ICELAKE_TEST_PG_PASSWORD"
PASSWORD = "pg-Sup3r-s3cret"


@dataclass(frozen=True)
class BrokenLake:
    settings: Settings
    ok: TableRef  # readable, ``files`` small files
    truncated: TableRef  # metadata.json cut after 40 bytes: left out at load
    bad_manifests: TableRef  # manifest list overwritten: discovered, its health cannot be computed
    far: TableRef  # the only table of catalog ``other`` (up until :func:`take_down`)

    def take_down_other(self) -> None:
        """Catalog ``other`` goes down after the load: its SQLite database disappears."""
        Path(self.settings.catalog_properties("other")["uri"].removeprefix("sqlite:///")).unlink()


def broken_lake(folder: Path, monkeypatch: pytest.MonkeyPatch, files: int = 1, **policy: Any) -> BrokenLake:
    monkeypatch.setenv(PASSWORD_ENV, PASSWORD)
    (folder / "lake" / "warehouse").mkdir(parents=True)
    pg = f"postgresql+psycopg2://icelake:${{{PASSWORD_ENV}}}@127.0.0.1:{free_port()}/icelake"
    config = folder / "icelake.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "catalogs": {
                    "good": {
                        "type": "sql",
                        "uri": "sqlite:///lake/catalog.db",
                        "warehouse": "lake/warehouse",
                    },
                    "other": {"type": "sql", "uri": "sqlite:///lake/other.db", "warehouse": "lake/warehouse"},
                    "pg": {"type": "sql", "uri": pg, "warehouse": "lake/pg"},
                    "gone": {
                        "type": "sql",
                        "uri": "sqlite:////nonexistent/dir/catalog.db",
                        "warehouse": "lake/gone",
                    },
                },
                "thresholds": {**TEST_THRESHOLDS, **policy},
            }
        )
    )
    settings = load_settings(config)
    schema = pa.schema([("id", pa.int64())])
    good = open_catalog(settings, "good", create=True)
    good.create_namespace("ns")
    for name in ("ok", "truncated", "bad_manifests"):
        table = good.create_table(("ns", name), schema)
        for i in range(files if name == "ok" else 1):
            table.append(pa.table({"id": pa.array([i], pa.int64())}))
    truncated = local_path(good.load_table(("ns", "truncated")).metadata_location)
    truncated.write_bytes(truncated.read_bytes()[:40])
    snapshot = good.load_table(("ns", "bad_manifests")).current_snapshot()
    assert snapshot is not None
    local_path(snapshot.manifest_list).write_bytes(b"not avro")
    other = open_catalog(settings, "other", create=True)
    other.create_namespace("ns")
    other.create_table(("ns", "far"), schema).append(pa.table({"id": pa.array([1], pa.int64())}))
    return BrokenLake(
        settings,
        ok=TableRef("good", ("ns",), "ok"),
        truncated=TableRef("good", ("ns",), "truncated"),
        bad_manifests=TableRef("good", ("ns",), "bad_manifests"),
        far=TableRef("other", ("ns",), "far"),
    )
