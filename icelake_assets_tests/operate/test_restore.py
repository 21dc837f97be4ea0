"""Restore points end to end, on real Spark and a real Dagster instance: the daily restore point the op
tags keeps its snapshot (and the snapshot's files) through an expiry that removes its neighbours, health
counts the files only it holds, and `icelake restore TABLE --to TAG` brings the table back to it by a
run of the icelake_restore job: refused while a writer's commit (and expired ones) would be lost, done
with --force, audited."""

from pathlib import Path

import pyarrow as pa
from dagster import DagsterInstance, DagsterRunStatus, RunsFilter

from icelake_assets.audit.store import AuditLog
from icelake_assets.catalog.connection import TableRef, open_catalog
from icelake_assets.cli import main
from icelake_assets.demo.lake import local_path
from icelake_assets.health.stats import compute_table_stats
from icelake_assets.maintenance.ops import runner
from icelake_assets.maintenance.ops.restore_points import manage_restore_points
from icelake_assets.policies import policy_for
from icelake_assets_tests.conftest import TEST_THRESHOLDS, catalog_name


def _rows(start: int) -> pa.Table:
    return pa.table({"id": pa.array(range(start, start + 3), pa.int64())})


def _ids(table) -> list[int]:
    table.refresh()
    return sorted(table.scan().to_arrow()["id"].to_pylist())


def test_a_restore_point_survives_expiry_and_restore_brings_the_table_back(
    make_lake, spark_for, tmp_path, monkeypatch, capsys
):
    settings = make_lake(
        {
            **TEST_THRESHOLDS,
            "snapshots": {"max_count": 1, "min_keep": 1, "min_age_hours": 0},
            "restore_points": {"every": "daily"},
        }
    )
    cat = open_catalog(settings, catalog_name(settings), create=True)
    cat.create_namespace("ns")
    table = cat.create_table(("ns", "t"), _rows(0).schema)
    ref = TableRef(catalog_name(settings), ("ns",), "t")
    policy = policy_for(settings, ref, table.properties)
    stats_fn = lambda t: compute_table_stats(t, policy)  # noqa: E731
    table.append(_rows(0))
    table.append(_rows(10))
    tagged = table.current_snapshot().snapshot_id
    made = manage_restore_points(lambda: None, ref, table, policy, stats_fn, run_id="r")
    [tag] = made.created
    tagged_files = [local_path(f.file.file_path) for f in table.scan(snapshot_id=tagged).plan_files()]
    table.append(_rows(20))  # writers after the restore point
    table.overwrite(_rows(30))  # pyiceberg: a delete, then an append
    writer = table.current_snapshot()

    expired = runner.expire_snapshots(lambda: spark_for(settings), ref, table, policy, stats_fn)
    table.refresh()
    kept = {s.snapshot_id for s in table.metadata.snapshots}
    assert expired.acted and expired.snapshots_expired == 3 and kept == {tagged, writer.snapshot_id}
    assert all(Path(p).is_file() for p in tagged_files) and len(tagged_files) == 2
    rp = compute_table_stats(table, policy).restore_points
    assert (rp.tags, rp.oldest, rp.held_files) == (1, tag, 2)
    assert rp.held_bytes == sum(Path(p).stat().st_size for p in tagged_files)

    # Refused: the overwrite is a writer's, and the append before it was expired (by whom: unknown).
    argv = ["--config", settings.source, "restore", str(ref), "--to", tag]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert f"1 commits by writers after it: {writer.snapshot_id} ({writer.summary.operation.value}, " in err
    assert "snapshot expiry removed from the metadata" in err and _ids(table) == [30, 31, 32]

    home = tmp_path / "dagster_home"
    home.mkdir()
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    assert main([*argv, "--force", "--by", "alice"]) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert f"restored to {tag} (snapshot {tagged})" in out and f"dropped {writer.snapshot_id}" in out
    assert _ids(table) == [0, 1, 2, 10, 11, 12] and table.current_snapshot().snapshot_id == tagged

    with DagsterInstance.get() as instance:
        [run] = instance.get_runs(RunsFilter(job_name="icelake_restore"))
        assert run.status == DagsterRunStatus.SUCCESS and run.tags["icelake/table"] == str(ref)
    [record] = [r for r in AuditLog.from_settings(settings).records(table=str(ref)) if r.kind == "rollback"]
    assert (record.decision, record.run_id, record.rolled_back_to) == ("rolled_back", run.run_id, tagged)
    restore = record.results["restore"]
    assert (restore["tag"], restore["requested_by"], restore["force"]) == (tag, "alice", True)
    assert [c["snapshot_id"] for c in restore["dropped"]] == [writer.snapshot_id]
    assert restore["unlisted_commits_dropped"] is True

    assert main(argv) == 0  # already there: nothing to restore
    assert "already at" in capsys.readouterr().out
