"""Validation of a run whose row expiry acted (pyiceberg tables, summaries only): the baseline moves
by exactly the rows the expiry's commits say they removed; any other change fails, and a rollback
counts those commits as the run's own."""

import pyarrow as pa
import pytest

from icelake_assets.catalog.connection import TableRef, open_catalog
from icelake_assets.maintenance.results.expire_data import ExpireDataResult, ExpiryCommit, rows_removed
from icelake_assets.maintenance.verify.post_run import baseline
from icelake_assets.maintenance.verify.validation import rollback_if_safe, validate_row_counts
from icelake_assets_tests.conftest import catalog_name, new_lake


def _rows(ids) -> pa.Table:
    return pa.table({"id": pa.array(list(ids), pa.int64())})


@pytest.fixture
def table(tmp_path_factory):
    settings = new_lake(tmp_path_factory)
    cat = open_catalog(settings, catalog_name(settings), create=True)
    cat.create_namespace("ns")
    t = cat.create_table(("ns", "t"), _rows([]).schema)
    t.append(_rows(range(10)))  # file 1: ids 0..9
    t.append(_rows(range(10, 30)))  # file 2: ids 10..29
    return TableRef(catalog_name(settings), ("ns",), "t"), t


def _expire(t, condition: str) -> tuple[int, dict[int, int]]:
    before = t.current_snapshot().snapshot_id
    t.delete(condition)
    t.refresh()
    snap = t.current_snapshot()
    return before, {snap.snapshot_id: rows_removed(dict(snap.summary.additional_properties))}


def test_the_expiry_s_committed_rows_move_the_baseline(table):
    ref, t = table
    before, expiry = _expire(t, "id < 10")  # file 1 dropped whole
    assert list(expiry.values()) == [10]
    t.append(_rows([100]))  # a writer after it
    result = validate_row_counts(None, ref, t, before, real_counts=False, expiry=expiry)
    assert result.ok, result.mismatch(ref)
    assert (result.rows_before, result.expired_rows, result.writer_rows_since, result.rows_after) == (
        30,
        10,
        1,
        21,
    )
    # Without knowing the commit is the expiry's, its rows count as a writer's (today's accounting):
    # the expiry is what makes the rows it removed expected.
    assert validate_row_counts(None, ref, t, before, real_counts=False).expired_rows == 0


def test_an_expiry_that_removed_other_rows_than_it_committed_fails(table):
    ref, t = table
    before, expiry = _expire(t, "id < 10")
    [snap] = expiry
    result = validate_row_counts(None, ref, t, before, real_counts=False, expiry={snap: 9})
    assert not result.ok and result.expiry_changes == [[snap, -10, -9]]
    assert "row expiry commit" in result.mismatch(ref)


def test_the_expiry_s_own_counts_and_the_rollback_of_its_commits(table):
    ref, t = table
    before, expiry = _expire(t, "id < 10")
    [snap] = expiry
    commit = ExpiryCommit(snap, "delete", 10, 1, 0, 100, 0, 0)
    res = ExpireDataResult(
        acted=True, reason="x", cutoff="c", commits=(commit,), snapshot_before=before,
        matched_before=12, matched_after=0,
    )  # fmt: skip
    start = baseline([res], snap)
    assert start.snapshot_id == before and start.rewrote and dict(start.expiry) == {snap: 10}
    assert "rows newer than the cut-off went" in (start.expiry_mismatch or "")
    # A writer's commit would block it; the expiry's own commit is the run's: rolled back.
    assert rollback_if_safe(t, before).rolled_back is False
    assert rollback_if_safe(t, before, frozenset(start.expiry)).rolled_back
