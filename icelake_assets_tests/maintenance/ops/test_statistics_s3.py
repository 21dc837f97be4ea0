"""compute_statistics on the lake on object storage (issue 39): SeaweedFS S3 behind its Iceberg REST
catalog, with credentials, Spark over S3A from the settings alone (in a process of its own,
s3_statistics_job.py). The NDV sketches are registered for the current snapshot and pyiceberg reads
them back from the Puffin file on S3; the partition statistics file, which SeaweedFS's table bucket
refuses under metadata/, is recorded as refused beside them instead of failing the op.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.transforms import IdentityTransform

from icelake_assets.catalog.connection import TableRef, load_table, open_catalog
from icelake_assets.health.statistics import read_puffin_ndv, statistics_facts
from icelake_assets.settings import load_settings
from icelake_assets_tests.catalog.test_s3_rest import KEY, SCHEMA, SECRET, _environ, settings_text
from icelake_assets_tests.servers import ServerUnavailable, seaweedfs_server

ROWS = 12_000  # over statistics.min_rows (10 000): the default policy computes them


@pytest.fixture(scope="module")
def weed():
    try:
        with seaweedfs_server((KEY, SECRET)) as server:
            yield server
    except ServerUnavailable as err:
        pytest.skip(str(err))


@pytest.fixture(scope="module")
def lake(weed, tmp_path_factory):
    """shop.orders partitioned by day, in 4 appends by pyiceberg, on S3 behind the REST catalog."""
    path = tmp_path_factory.mktemp("s3stats") / "icelake.yaml"
    path.write_text(settings_text(weed))
    with pytest.MonkeyPatch.context() as mp:
        for key in [k for k in os.environ if k.startswith("AWS_")]:
            mp.delenv(key)
        for key, value in _environ().items():
            mp.setenv(key, value)
        catalog = open_catalog(load_settings(path), "lake")
        catalog.create_namespace_if_not_exists("shop")
        spec = PartitionSpec(PartitionField(2, 1000, IdentityTransform(), "day"))
        table = catalog.create_table("shop.orders", SCHEMA, partition_spec=spec)
        for batch in range(4):
            ids = range(batch * ROWS // 4, (batch + 1) * ROWS // 4)
            table.append(
                pa.table(
                    {
                        "id": pa.array(ids, pa.int64()),
                        "day": [f"2026-11-{1 + i % 2:02d}" for i in ids],
                        "note": [f"n{i % 1000}" for i in ids],
                    }
                )
            )
        yield {"path": path, "catalog": catalog}


def _statistics_job(lake) -> dict:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "icelake_assets_tests.maintenance.ops.s3_statistics_job",
            str(lake["path"]),
            "lake",
            "shop",
            "orders",
        ],
        env=_environ(),
        capture_output=True,
        text=True,
        timeout=480,
        cwd=Path(__file__).resolve().parents[3],
    )
    assert done.returncode == 0, done.stderr[-4000:]
    assert SECRET not in done.stdout + done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_statistics_are_registered_on_s3_and_read_back_by_pyiceberg(lake):
    result = _statistics_job(lake)
    assert result["acted"], result["reason"]
    assert result.get("error") is None, result
    table = load_table(lake["catalog"], TableRef("lake", ("shop",), "orders"))
    facts = statistics_facts(table)
    path = result["statistics_file"]
    assert path.startswith("s3://warehouse/shop/orders/metadata/") and path.endswith(".stats")
    assert facts.current and facts.path == path  # registered for the current snapshot
    assert result["registered"] and result["ndv_read_back"] == 3
    current = table.current_snapshot()
    assert current is not None and result["statistics_snapshot_id"] == current.snapshot_id
    ndv = read_puffin_ndv(table, path)  # from the Puffin file itself, over pyiceberg's S3 FileIO
    ids = {name: i for i, name in facts.columns}
    assert ndv[ids["day"]] == 2 and ndv[ids["note"]] == 1000
    assert abs(ndv[ids["id"]] - ROWS) < ROWS * 0.05  # a theta sketch's estimate
    # SeaweedFS admits *.metadata.json, *.avro and *.stats under metadata/, not Iceberg's
    # partition-stats-*.parquet: that refusal is recorded beside the registered table statistics.
    assert result["partition_statistics_error_kind"] == "access_denied", result
    assert "403" in result["partition_statistics_error"]
    assert "partition statistics failed" in result["reason"]
