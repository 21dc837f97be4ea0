"""The restore's guard on a real pyiceberg table (no Spark): commits by writers after the tag refuse
the restore, named (snapshot id, operation, time), unless forced; this product's own commits (a run id
in their summary) do not; an unknown tag or table is an error naming it. The command line refuses
before launching anything."""

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
from icelake_assets.types import SNAPSHOT_RUN_ID
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
