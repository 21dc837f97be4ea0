"""The restore's guard on a real pyiceberg table (no Spark): commits by writers after the tag refuse
the restore, named (snapshot id, operation, time), unless forced; this product's own commits (a run id
in their summary) do not, except a retention expiry's (expire_data): restoring to before it would
bring its rows back, so it refuses too, naming the expiry (snapshot id, time, cut-off, rows); an
unknown tag or table is an error naming it. The command line refuses before launching anything."""

import re
from datetime import UTC, datetime

import pyarrow as pa
import pytest

from icelake_assets.catalog.connection import open_catalog
from icelake_assets.cli import main
from icelake_assets.maintenance.verify.restore import (
    RestoreRefused,
    UnknownRestorePoint,
    restore_check,
    restore_to_tag,
)
from icelake_assets.types import SNAPSHOT_OP, SNAPSHOT_RETENTION_CUTOFF, SNAPSHOT_RUN_ID
from icelake_assets_tests.conftest import TEST_THRESHOLDS, catalog_name, new_lake


def _rows(start: int) -> pa.Table:
    return pa.table({"id": pa.array(range(start, start + 3), pa.int64())})


def _ids(table) -> list[int]:
    table.refresh()
    return sorted(table.scan().to_arrow()["id"].to_pylist())


@pytest.fixture
def lake(tmp_path_factory):
    settings = new_lake(tmp_path_factory, TEST_THRESHOLDS)
    cat = open_catalog(settings, catalog_name(settings), create=True)
    cat.create_namespace("ns")
    table = cat.create_table(("ns", "t"), _rows(0).schema)
    table.append(_rows(0))
    table.manage_snapshots().create_tag(
        table.current_snapshot().snapshot_id, "icelake-daily-2031-03-12"
    ).commit()
    return settings, table


def test_our_own_commits_after_the_tag_do_not_refuse_the_restore(lake):
    _, table = lake
    tagged = table.current_snapshot().snapshot_id
    table.append(_rows(10), snapshot_properties={SNAPSHOT_RUN_ID: "run-1"})  # as a maintenance run's
    check = restore_to_tag(table, "icelake-daily-2031-03-12")
    assert check.refusal() is None and [c.run_id for c in check.dropped] == ["run-1"]
    table.refresh()
    assert table.current_snapshot().snapshot_id == tagged and _ids(table) == [0, 1, 2]


def test_a_writers_commit_refuses_the_restore_naming_it_unless_forced(lake, capsys):
    settings, table = lake
    table.append(_rows(10))
    writer = table.current_snapshot()
    with pytest.raises(
        RestoreRefused, match=rf"1 commits by writers after it: {writer.snapshot_id} \(append, "
    ):
        restore_to_tag(table, "icelake-daily-2031-03-12")
    assert _ids(table) == [0, 1, 2, 10, 11, 12]  # nothing changed

    argv = ["--config", settings.source, "restore", f"{catalog_name(settings)}.ns.t"]
    assert main([*argv, "--to", "icelake-daily-2031-03-12"]) == 1
    err = capsys.readouterr().err
    assert f"would drop 1 commits by writers after it: {writer.snapshot_id} (append" in err
    assert "give --force" in err and _ids(table) == [0, 1, 2, 10, 11, 12]

    check = restore_to_tag(table, "icelake-daily-2031-03-12", force=True)
    assert [c.snapshot_id for c in check.writers] == [writer.snapshot_id]
    assert _ids(table) == [0, 1, 2]


def test_an_unknown_tag_or_table_is_named(lake, capsys):
    settings, table = lake
    with pytest.raises(
        UnknownRestorePoint, match=r"ns\.t has no tag 'nope' \(its tags: icelake-daily-2031-03-12\)"
    ):
        restore_check(table, "nope")
    with pytest.raises(UnknownRestorePoint, match="has no tag 'main'"):  # a branch is no restore point
        restore_check(table, "main")
    name = catalog_name(settings)
    assert main(["--config", settings.source, "restore", f"{name}.ns.t", "--to", "nope"]) == 2
    assert "has no tag 'nope'" in capsys.readouterr().err
    assert main(["--config", settings.source, "restore", f"{name}.ns.missing", "--to", "x"]) == 2
    assert f"table {name}.ns.missing does not exist" in capsys.readouterr().err


def _expire(table, where: str) -> int:
    """A retention expiry's commit, as expire_data makes it (its run, op and cut-off in the summary)."""
    table.delete(
        where,
        snapshot_properties={
            SNAPSHOT_RUN_ID: "run-expiry",
            SNAPSHOT_OP: "expire_data",
            SNAPSHOT_RETENTION_CUTOFF: "2031-03-05T00:00:00+00:00",
        },
    )
    return table.current_snapshot().snapshot_id


def test_a_retention_expiry_after_the_tag_refuses_the_restore_naming_it_unless_forced(lake, capsys):
    settings, table = lake
    expiry = _expire(table, "id < 2")  # removes 0 and 1, rewrites 2
    at = datetime.fromtimestamp(table.current_snapshot().timestamp_ms / 1000, UTC)
    named = (
        f"bring back 2 rows that 1 retention expiries removed after it: expire_data snapshot {expiry} "
        f"at {at:%Y-%m-%d %H:%M:%S} UTC (cut-off 2031-03-05T00:00:00+00:00, 2 rows removed)"
    )
    with pytest.raises(RestoreRefused, match=re.escape(named)):
        restore_to_tag(table, "icelake-daily-2031-03-12")
    assert _ids(table) == [2]  # nothing came back

    argv = ["--config", settings.source, "restore", f"{catalog_name(settings)}.ns.t"]
    assert main([*argv, "--to", "icelake-daily-2031-03-12"]) == 1
    err = capsys.readouterr().err
    assert named in err and "give --force to restore anyway" in err and _ids(table) == [2]

    check = restore_to_tag(table, "icelake-daily-2031-03-12", force=True)
    assert [c.snapshot_id for c in check.expiries] == [expiry] and check.rows_brought_back == 2
    assert check.to_dict()["expiries_undone"] == [
        {
            "snapshot_id": expiry,
            "operation": check.expiries[0].operation,
            "timestamp_ms": check.expiries[0].timestamp_ms,
            "run_id": "run-expiry",
            "op": "expire_data",
            "rows_removed": 2,
            "cutoff": "2031-03-05T00:00:00+00:00",
        }
    ]
    assert _ids(table) == [0, 1, 2]


def test_an_expiry_before_the_tag_does_not_refuse(lake):
    _, table = lake
    table.append(_rows(10))
    _expire(table, "id < 2")  # before the tag: restoring to the tag keeps its work
    table.manage_snapshots().create_tag(table.current_snapshot().snapshot_id, "after-expiry").commit()
    table.append(_rows(20), snapshot_properties={SNAPSHOT_RUN_ID: "run-1"})
    check = restore_to_tag(table, "after-expiry")
    assert check.refusal() is None and check.expiries == () and _ids(table) == [2, 10, 11, 12]
