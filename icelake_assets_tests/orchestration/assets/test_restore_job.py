"""The icelake_restore job on a real pyiceberg table (SQLite catalog), no Spark: restore_table runs it
by execute_in_process on an ephemeral DagsterInstance. A restore that would bring back rows a retention
expiry removed is refused without --force; with it, it says so and the audit record names the
expiries undone. A run fenced before its commit (judged dead, terminated) commits nothing, as an op
of the maintenance would not."""

import pyarrow as pa
import pytest

from icelake_assets.audit.store import AuditLog
from icelake_assets.catalog.connection import TableRef, open_catalog
from icelake_assets.cli import main
from icelake_assets.maintenance.spark import fencing
from icelake_assets.operate.restore import RestoreFailed, restore_table
from icelake_assets.types import SNAPSHOT_OP, SNAPSHOT_RETENTION_CUTOFF, SNAPSHOT_RUN_ID
from icelake_assets_tests.conftest import TEST_THRESHOLDS, catalog_name, new_lake

TAG = "icelake-daily-2031-03-12"


def _ids(table) -> list[int]:
    table.refresh()
    return sorted(table.scan().to_arrow()["id"].to_pylist())


@pytest.fixture
def lake(tmp_path_factory, monkeypatch):
    monkeypatch.delenv("DAGSTER_HOME", raising=False)  # an ephemeral instance per restore
    settings = new_lake(tmp_path_factory, TEST_THRESHOLDS)
    cat = open_catalog(settings, catalog_name(settings), create=True)
    cat.create_namespace("ns")
    table = cat.create_table(("ns", "t"), pa.schema([("id", pa.int64())]))
    table.append(pa.table({"id": pa.array([0, 1, 2], pa.int64())}))
    table.manage_snapshots().create_tag(table.current_snapshot().snapshot_id, TAG).commit()
    return settings, TableRef(catalog_name(settings), ("ns",), "t"), table


def test_a_forced_restore_over_an_expiry_says_so_and_audits_it(lake, capsys):
    settings, ref, table = lake
    table.delete(  # a retention expiry's commit (expire_data, by a run of the product)
        "id < 2",
        snapshot_properties={
            SNAPSHOT_RUN_ID: "run-expiry",
            SNAPSHOT_OP: "expire_data",
            SNAPSHOT_RETENTION_CUTOFF: "2031-03-05T00:00:00+00:00",
        },
    )
    expiry = table.current_snapshot().snapshot_id
    argv = ["--config", settings.source, "restore", str(ref), "--to", TAG]
    assert main(argv) == 1 and _ids(table) == [2]  # refused: the expired rows stay gone
    assert f"expire_data snapshot {expiry}" in capsys.readouterr().err

    assert main([*argv, "--force", "--by", "alice"]) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert (
        f"forced: brought back 2 rows that 1 retention expiries removed after it: expire_data snapshot {expiry}"
        in out
    )
    assert _ids(table) == [0, 1, 2]
    [record] = [r for r in AuditLog.from_settings(settings).records(table=str(ref)) if r.kind == "rollback"]
    assert record.decision == "rolled_back" and "undoing 2 rows" in record.reason
    restore = record.results["restore"]
    assert [e["snapshot_id"] for e in restore["expiries_undone"]] == [expiry]
    assert restore["rows_brought_back"] == 2 and restore["force"] is True


def test_a_fenced_restore_run_commits_nothing(lake, monkeypatch):
    settings, ref, table = lake
    table.append(pa.table({"id": pa.array([10], pa.int64())}), snapshot_properties={SNAPSHOT_RUN_ID: "r"})
    before = table.current_snapshot().snapshot_id
    arm = fencing.arm

    def armed_and_fenced(run_id: str) -> None:  # judged dead as soon as it starts
        arm(run_id)
        fencing.fence(run_id, "judged dead by the sensor (test)")

    monkeypatch.setattr(fencing, "arm", armed_and_fenced)
    try:
        with pytest.raises(RestoreFailed, match="this run stops before its next commit: judged dead"):
            restore_table(settings, ref, TAG)
    finally:
        arm("after-the-fenced-restore")  # later runs of this process start unfenced
    table.refresh()
    assert table.current_snapshot().snapshot_id == before and _ids(table) == [0, 1, 2, 10]
