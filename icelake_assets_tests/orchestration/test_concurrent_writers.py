"""Maintenance beside live writers: Iceberg's optimistic concurrency retries, validation accounts for
the writers' rows, and every appended row is present exactly once; a rollback never drops them."""

import threading
import time

import pyarrow as pa
import pyarrow.compute as pc
from dagster import DagsterInstance
from pyiceberg.exceptions import CommitFailedException
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField

from icelake_assets.catalog.connection import TableRef, open_catalog
from icelake_assets.maintenance.spark import procedures
from icelake_assets.maintenance.verify.validation import rollback_if_safe
from icelake_assets.orchestration.project import MAINTENANCE_JOB, build_definitions
from icelake_assets_tests.conftest import catalog_name

SCHEMA = Schema(NestedField(1, "id", LongType()))


def _rows(start: int, n: int) -> pa.Table:
    return pa.table({"id": pa.array(range(start, start + n), pa.int64())})


def _table(settings, files: int):
    cat = open_catalog(settings, catalog_name(settings), create=True)
    cat.create_namespace("ns")
    table = cat.create_table(("ns", "live"), SCHEMA)
    for i in range(files):
        table.append(_rows(i * 10, 10))
    return table


def test_a_writer_appending_while_compaction_runs_loses_and_duplicates_nothing(make_lake):
    settings = make_lake()
    table = _table(settings, 40)
    writer_table = open_catalog(settings, catalog_name(settings)).load_table(("ns", "live"))
    stop = threading.Event()
    appended: list[int] = []
    errors: list[BaseException] = []

    def writer() -> None:
        next_id = 1_000_000
        while not stop.is_set():
            for attempt in range(20):  # a real writer retries a lost optimistic commit
                try:
                    writer_table.refresh()
                    writer_table.append(_rows(next_id, 5))
                    appended.extend(range(next_id, next_id + 5))
                    next_id += 5
                    break
                except CommitFailedException:
                    time.sleep(0.05 * (attempt + 1))
            else:
                errors.append(RuntimeError("writer gave up after 20 attempts"))
                return
            time.sleep(0.1)

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        result = (
            build_definitions(settings)
            .resolve_job_def(MAINTENANCE_JOB)
            .execute_in_process(instance=DagsterInstance.ephemeral(), raise_on_error=False)
        )
    finally:
        stop.set()
        thread.join(timeout=60)
    assert not errors
    assert result.success, [
        str(e.event_specific_data.error) for e in result.all_events if e.event_type_value == "STEP_FAILURE"
    ]
    md = result.get_asset_materialization_events()[0].materialization.metadata
    assert "rewrite_data_files" in md["ops/acted"].value
    assert appended, "the writer never committed during the run"
    table.refresh()
    ids = table.scan().to_arrow()["id"]
    expected = set(range(400)) | set(appended)
    assert len(ids) == len(expected)  # nothing duplicated ...
    assert set(ids.to_pylist()) == expected  # ... nothing lost
    assert pc.count_distinct(ids).as_py() == len(ids)


def test_rollback_is_refused_when_a_writer_committed_after_the_rewrite(make_lake, spark_for):
    settings = make_lake()
    table = _table(settings, 6)
    before = table.current_snapshot().snapshot_id
    ref = TableRef(catalog_name(settings), ("ns",), "live")
    procedures.rewrite_data_files(spark_for(settings), ref, options={"min-input-files": "2"})
    table.refresh()
    table.append(_rows(999, 1))
    writer_snapshot = table.current_snapshot().snapshot_id
    outcome = rollback_if_safe(table, before)
    assert not outcome.rolled_back and outcome.writer_snapshots == (writer_snapshot,)
    assert "would lose their rows" in outcome.reason
    table.refresh()
    assert table.current_snapshot().snapshot_id == writer_snapshot and table.scan().to_arrow().num_rows == 61
