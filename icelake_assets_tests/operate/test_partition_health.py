"""`icelake health TABLE --partitions` on a real lake (SQLite catalog, pyiceberg): the unhealthy
partitions by Dagster key with their failing checks and numbers, as a table and as
``icelake.partition_health/v1``; ``--fail-on`` exits 1 on them; an unpartitioned table has none."""

from __future__ import annotations

import json

import pytest
from pyiceberg.partitioning import PartitionSpec

from icelake_assets.catalog.connection import open_catalog
from icelake_assets.cli import main
from icelake_assets.settings import Settings
from icelake_assets_tests.conftest import TEST_THRESHOLDS, catalog_name, new_lake
from icelake_assets_tests.health.conftest import BY_DAY, SCHEMA, batch

# The shape of icelake.partition_health/v1 (docs/health.md, "Per partition").
FINDING_KEYS = {"check", "severity", "summary", "recommendation", "metrics"}
DOC_KEYS = {
    "schema",
    "table",
    "snapshot_id",
    "partitioned",
    "dimensions",
    "partitions_evaluated",
    "unhealthy_partitions",
    "checks",
    "partitions",
}


def degraded_lake(tmp_path_factory) -> tuple[Settings, str, str]:
    """``ns.days``: 6 days, days 1 and 4 with 7 small files each (max 5 per partition); ``ns.flat``:
    unpartitioned, 7 small files."""
    thresholds = {**TEST_THRESHOLDS, "small_files": {"max_files_per_partition": 5}}
    settings = new_lake(tmp_path_factory, thresholds)
    name = catalog_name(settings)
    catalog = open_catalog(settings, name, create=True)
    catalog.create_namespace("ns")
    days = catalog.create_table(("ns", "days"), schema=SCHEMA, partition_spec=BY_DAY)
    days.append(batch(range(600), [i % 6 for i in range(600)]))
    for n in range(6):
        days.append(batch(range(1000 + n * 10, 1010 + n * 10), [1, 4] * 5))
    flat = catalog.create_table(("ns", "flat"), schema=SCHEMA, partition_spec=PartitionSpec())
    for n in range(7):
        flat.append(batch(range(n * 10, n * 10 + 10), 0))
    return settings, f"{name}.ns.days", f"{name}.ns.flat"


@pytest.fixture(scope="module")
def lake(tmp_path_factory) -> tuple[Settings, str, str]:
    return degraded_lake(tmp_path_factory)


def test_json_lists_exactly_the_unhealthy_partitions_with_their_numbers(lake, capsys):
    settings, days, _ = lake
    assert main(["--config", settings.source, "health", days, "--partitions", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert set(doc) == DOC_KEYS and doc["schema"] == "icelake.partition_health/v1"
    assert doc["table"] == days and doc["partitioned"] is True and doc["dimensions"] == ["ts_day"]
    assert (doc["partitions_evaluated"], doc["unhealthy_partitions"]) == (6, 2)
    assert [p["key"] for p in doc["partitions"]] == ["2024-03-02", "2024-03-05"]
    for p in doc["partitions"]:
        assert p["labels"] == [f"ts_day={p['key']}"] and p["severity"] == "WARN"
        (f,) = p["failing"]
        assert set(f) == FINDING_KEYS and f["check"] == "small_files"
        assert f["metrics"]["data_files"] == 7 and f["metrics"]["small_files"] == 7
        assert f["metrics"]["max_files_per_partition"] == 5 and f["metrics"]["avg_file_bytes"] > 0
    checks = {c["check"]: c for c in doc["checks"]}
    assert list(checks) == ["small_files", "delete_files", "layout_drift"]
    assert checks["small_files"]["failing_partitions"] == 2
    assert checks["small_files"]["worst"] == [
        {"key": k, "labels": [f"ts_day={k}"], "severity": "WARN", "over_threshold": 1.4}
        for k in ("2024-03-02", "2024-03-05")
    ]
    assert checks["delete_files"] == {"check": "delete_files", "failing_partitions": 0, "worst": []}
    # --top: the worst N per check; --fail-on: exit 1 when a partition's finding reaches it.
    assert main(["--config", settings.source, "health", days, "--partitions", "--json", "--top", "1"]) == 0
    assert len(json.loads(capsys.readouterr().out)["checks"][0]["worst"]) == 1
    assert main(["--config", settings.source, "health", days, "--partitions", "--fail-on", "warn"]) == 1
    assert main(["--config", settings.source, "health", days, "--partitions", "--fail-on", "error"]) == 0


def test_the_table_names_each_unhealthy_partition_its_check_and_numbers(lake, capsys):
    settings, days, _ = lake
    assert main(["--config", settings.source, "health", days, "--partitions"]) == 0
    out = capsys.readouterr().out
    rows = [line.split() for line in out.splitlines() if line.startswith("2024-")]
    assert [r[:3] for r in rows] == [
        ["2024-03-02", "small_files", "WARN"],
        ["2024-03-05", "small_files", "WARN"],
    ]
    assert all("data_files=7," in line for line in out.splitlines() if line.startswith("2024-"))
    summary = {line.split()[0]: line.split()[1:] for line in out.split("\n\n")[0].splitlines()[2:]}
    assert summary == {
        "small_files": ["2", "2024-03-02", "(1.4x),", "2024-03-05", "(1.4x)"],
        "delete_files": ["0"],
        "layout_drift": ["0"],
    }
    assert f"2 of 6 partitions of {days} are unhealthy" in out


def test_an_unpartitioned_table_and_a_missing_table(lake, capsys):
    settings, _, flat = lake
    assert main(["--config", settings.source, "health", flat, "--partitions", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["partitioned"] is False and doc["partitions"] == [] and doc["dimensions"] == []
    assert all(c["failing_partitions"] == 0 for c in doc["checks"])
    assert main(["--config", settings.source, "health", flat, "--partitions"]) == 0
    assert "is not partitioned" in capsys.readouterr().out
    assert main(["--config", settings.source, "health", "--partitions"]) == 2
    assert "--partitions needs a TABLE" in capsys.readouterr().err
    missing = flat.rsplit(".", 1)[0] + ".nope"
    assert main(["--config", settings.source, "health", missing, "--partitions"]) != 0
    assert "nope" in capsys.readouterr().err
