"""Orphans deleted in two phases (issue 40) on a real pyiceberg lake (the orphan op needs no Spark): a
run records candidates and deletes nothing; a run past the window deletes those still unreferenced and
unchanged; one that became referenced or changed meanwhile stays, dropped with why. The clock is moved
by passing ``now``."""

from __future__ import annotations

import json
import os
import time
import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from icelake_assets.audit.orphan_candidates import OrphanCandidates
from icelake_assets.catalog.connection import TableRef, open_catalog
from icelake_assets.catalog.known_tables import known_tables
from icelake_assets.cli import main
from icelake_assets.demo.lake import age_all_files, local_path
from icelake_assets.health.orphans import scan_table_orphans
from icelake_assets.maintenance.ops import runner
from icelake_assets.maintenance.results.models import OrphanResult
from icelake_assets.policies import policy_for
from icelake_assets_tests.conftest import TEST_THRESHOLDS, catalog_name, new_lake
from icelake_assets_tests.operate.shapes import ORPHANS, assert_shape

DAY = 24 * 3600
ROWS = pa.table({"id": pa.array([1, 2, 3, 4], pa.int64())})


@pytest.fixture(scope="module")
def lake(tmp_path_factory):
    settings = new_lake(
        tmp_path_factory, {**TEST_THRESHOLDS, "orphans": {"max_count": 0, "recovery_window_hours": 24}}
    )
    catalog = open_catalog(settings, catalog_name(settings), create=True)
    catalog.create_namespace("a")
    return {"settings": settings, "catalog": catalog, "store": OrphanCandidates(catalog)}


def _table(lake, short: str):
    ref = TableRef(lake["catalog"].name, ("a",), short)
    table = lake["catalog"].create_table(ref.identifier, schema=ROWS.schema)
    table.append(ROWS)
    age_all_files(table, 5)
    return ref, table


def _plant(table, age_days: float = 5.0, rows: int = 2) -> Path:
    """A data file no snapshot references, without field ids (so add_files may register it later)."""
    path = local_path(table.metadata.location) / "data" / f"00000-0-{uuid.uuid4()}.parquet"
    pq.write_table(pa.table({"id": pa.array(range(100, 100 + rows), pa.int64())}), path)
    old = time.time() - age_days * DAY
    os.utime(path, (old, old))
    return path


def _run(lake, ref, table, now: float, after_scan=None) -> OrphanResult:
    settings = lake["settings"]

    def scan(r, t, p):
        found = scan_table_orphans(lake["catalog"], r, t, p.orphans.older_than_hours, known_tables(settings))
        if after_scan:
            after_scan()  # what happens between the listing and the deletions
        return found

    return runner.remove_orphan_files(
        lambda: pytest.fail("the orphan op needs no Spark"),
        ref,
        table,
        policy_for(settings, ref, table.properties),
        lambda t: pytest.fail("the orphan op decides from its scan"),
        scan,
        candidates=lake["store"],
        now=now,
    )


def test_a_candidate_is_recorded_first_and_deleted_only_past_its_window(lake, capsys):
    ref, table = _table(lake, "plain")
    orphans = [_plant(table), _plant(table)]
    t0 = time.time()
    first = _run(lake, ref, table, t0)
    assert first.acted and first.orphans_removed == 0 and first.candidates_recorded == 2
    assert first.pending_files == 2 and first.pending_bytes == sum(p.stat().st_size for p in orphans)
    assert first.metrics()["bytes/orphans_pending"] == first.pending_bytes
    assert all(p.exists() for p in orphans)
    assert {c.path for c in lake["store"].candidates(str(ref))} == {str(p) for p in orphans}

    assert main(["--config", lake["settings"].source, "orphans", str(ref), "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert_shape(listed, ORPHANS)
    assert listed["recovery_window_hours"] == 24
    assert sorted(c["path"] for c in listed["pending"]) == sorted(str(p) for p in orphans)
    assert listed["totals"]["pending"] == 2 and listed["totals"]["removable"] == 0

    early = _run(lake, ref, table, t0 + DAY - 60)  # still in the window: nothing deleted, nothing recorded
    assert early.orphans_removed == 0 and early.candidates_recorded == 0 and early.pending_files == 2
    assert all(p.exists() for p in orphans)

    late = _run(lake, ref, table, t0 + DAY + 60)
    assert late.acted and late.orphans_removed == 2 and late.pending_files == 0
    assert late.bytes_removed == first.pending_bytes
    assert not any(p.exists() for p in orphans)
    assert lake["store"].candidates(str(ref)) == []
    assert table.scan().to_arrow().num_rows == 4


def test_a_candidate_registered_by_a_late_commit_is_not_deleted(lake):
    ref, table = _table(lake, "late_commit")
    registered, orphan = _plant(table), _plant(table)
    t0 = time.time()
    assert _run(lake, ref, table, t0).candidates_recorded == 2
    table.add_files([str(registered)])  # a writer's late commit makes the candidate live
    late = _run(lake, ref, table, t0 + DAY + 60)
    assert late.orphans_removed == 1 and late.removed_sample == (str(orphan),)
    assert registered.exists() and not orphan.exists()
    assert any(d.startswith(str(registered)) and "referenced" in d for d in late.candidates_dropped)
    assert late.referenced_files_verified  # every referenced file is still there
    assert table.refresh().scan().to_arrow().num_rows == 6  # the table is intact, the late file readable
    assert lake["store"].candidates(str(ref)) == []


def test_a_candidate_that_changed_is_not_deleted_and_waits_again(lake):
    ref, table = _table(lake, "changed")
    grown, touched, raced = _plant(table), _plant(table), _plant(table)
    t0 = time.time()
    assert _run(lake, ref, table, t0).candidates_recorded == 3
    pq.write_table(pa.table({"id": pa.array(range(50), pa.int64())}), grown)  # another size
    for path in (grown, touched):  # still old enough to be an orphan, but not as recorded
        old = time.time() - 4 * DAY
        os.utime(path, (old, old))

    def rewrite_raced() -> None:  # changed after the listing, before its deletion
        os.utime(raced, (time.time() - 3.5 * DAY, time.time() - 3.5 * DAY))

    late = _run(lake, ref, table, t0 + DAY + 60, after_scan=rewrite_raced)
    assert late.orphans_removed == 0
    assert grown.exists() and touched.exists() and raced.exists()
    dropped = "\n".join(late.candidates_dropped)
    assert f"{grown}: changed since recorded" in dropped and f"{touched}: changed since recorded" in dropped
    assert f"{raced}: changed or gone at deletion time" in dropped
    # The changed files are candidates again, their window starting at this run.
    again = {c.path: c.first_seen for c in lake["store"].candidates(str(ref))}
    assert again[str(grown)] == pytest.approx(t0 + DAY + 60) and again[str(touched)] == again[str(grown)]
