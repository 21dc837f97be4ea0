"""The audit log on a real SQLite catalog: round trip, one commit per batch, concurrent appenders from
two processes, conflict retries that reuse their files, Spark reading the table, bad input refused."""

import multiprocessing
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField, StringType, TimestamptzType

from icelake_assets.audit import AuditLog, AuditLogError, AuditRecord
from icelake_assets.audit.store import AUDIT_SCHEMA
from icelake_assets.catalog.connection import open_catalog
from icelake_assets.catalog.discovery import discover_tables
from icelake_assets.settings import SettingsError, load_settings, parse_settings

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def _catalog_name(settings) -> str:
    return next(iter(settings.catalogs))


def _records(cat: str, n: int, start: datetime = T0, **kw) -> list[AuditRecord]:
    return [
        AuditRecord(
            f"{cat}.taxi.trips",
            "decision",
            "deferred",
            "sensor",
            reason=f"writer active {i}",
            writer_check={"quiet": False, "last_commit_minutes_ago": i},
            recorded_at=start + timedelta(minutes=i),
            **kw,
        )
        for i in range(n)
    ]


def _full_record(cat: str) -> AuditRecord:
    return AuditRecord(
        f"{cat}.taxi.trips",
        "op",
        "acted",
        "backfill",
        op="rewrite_data_files",
        run_id="run-42",
        reason="6 partitions over 20 files",
        signals={"small_files": 180, "ratio": 0.5},
        policy={"small_files": {"max_files_per_partition": 20}},
        partitions=("d=1", "d=2"),
        partitions_reason="most small files first",
        failed_partitions=("d=2",),
        writer_check={"quiet": True},
        cost_estimate_bytes=5_000_000,
        snapshot_before=2**62 + 3,
        snapshot_after=99,
        results={"rewritten_data_files_count": 180, "added_data_files_count": 6},
        rolled_back_to=None,
        duration_s=4.25,
        recorded_at=T0 - timedelta(days=1),
    )


def _data_files_on_disk(log: AuditLog) -> set[str]:
    root = Path(urlsplit(log.table().location()).path) / "data"
    return {str(p) for p in root.rglob("*.parquet")}


def _data_files_referenced(log: AuditLog) -> set[str]:
    files = log.table().inspect.files().column("file_path").to_pylist()
    return {urlsplit(f).path for f in files}


def _new(make_lake, **kw):
    settings = make_lake(**kw)
    open_catalog(settings, _catalog_name(settings), create=True)  # a new lake: create its SQLite catalog
    return settings


@pytest.fixture
def lake(make_lake):
    settings = _new(make_lake)
    return settings, AuditLog.from_settings(settings)


def test_round_trip_keeps_every_field_and_filters(lake):
    settings, log = lake
    cat = _catalog_name(settings)
    full = _full_record(cat)
    other = AuditRecord(
        f"{cat}.sales.orders",
        "decision",
        "held",
        "sensor",
        cost_estimate_bytes=10**12,
        recorded_at=T0 + timedelta(hours=1),
        run_id="run-43",
    )
    deferred = _records(cat, 3)
    assert log.append([*deferred, full, other]) == 5
    assert log.records() == [full, *deferred, other]  # oldest first
    assert log.records(table=f"{cat}.taxi.trips") == [full, *deferred]
    assert log.records(since=T0 + timedelta(minutes=1)) == [*deferred[1:], other]
    assert log.records(run_id="run-42") == [full]
    assert log.records(table=f"{cat}.sales.orders", since=T0 + timedelta(hours=2)) == []


def test_the_table_is_created_in_the_internal_namespace_and_never_discovered(lake):
    settings, log = lake
    cat = _catalog_name(settings)
    assert log.name == f"{cat}.icelake.audit_log"
    assert log.records() == [] and log.table(create=False) is None  # reading creates nothing
    log.append(_records(cat, 1))
    catalog = open_catalog(settings, cat)
    assert ("icelake", "audit_log") in catalog.list_tables("icelake")
    assert [t.ref for t in discover_tables(settings) if t.ref.namespace[0] == "icelake"] == []
    assert str(log.table().spec().fields[0].transform) == "day"


def test_one_commit_per_batch_and_an_empty_batch_commits_nothing(lake):
    settings, log = lake
    cat = _catalog_name(settings)
    log.append(_records(cat, 4))
    log.append(_records(cat, 2, start=T0 + timedelta(days=3)))
    assert log.append([]) == 0
    snaps = log.table().metadata.snapshots
    assert len(snaps) == 2
    assert [s.summary["icelake.audit.records"] for s in snaps] == ["4", "2"]
    assert len(log.records()) == 6


def test_two_processes_appending_at_once_lose_nothing(lake):
    settings, log = lake
    ctx = multiprocessing.get_context("spawn")  # a fresh interpreter each, like a sensor and a run
    start = ctx.Event()
    procs = [ctx.Process(target=_append_many, args=(settings.source, tag, 12, start)) for tag in ("a", "b")]
    for p in procs:
        p.start()
    start.set()
    for p in procs:
        p.join(timeout=240)
    assert [p.exitcode for p in procs] == [0, 0]
    records = log.records()
    reasons = sorted(r.reason for r in records)
    assert reasons == sorted(f"{tag}-{i}-{j}" for tag in "ab" for i in range(12) for j in range(2))
    assert len({r.record_id for r in records}) == 48
    assert len(log.table().metadata.snapshots) == 24  # one commit per batch, none repeated
    assert _data_files_on_disk(log) == _data_files_referenced(log)  # retries left no orphan data file


def _append_many(settings_path: str, tag: str, batches: int, start) -> None:
    settings = load_settings(settings_path)
    log = AuditLog.from_settings(settings)
    cat = next(iter(settings.catalogs))
    start.wait(60)
    for i in range(batches):
        log.append(
            [
                AuditRecord(f"{cat}.taxi.trips", "decision", "skipped", "sensor", reason=f"{tag}-{i}-{j}")
                for j in range(2)
            ]
        )


def _conflict_once(monkeypatch, log: AuditLog, other: AuditLog, cat: str) -> None:
    """Between writing its files and committing, ``log`` loses the race to a real commit of ``other``."""
    write = AuditLog._write_files
    done = []

    def write_then_lose_race(self, table, arrow):
        files = write(self, table, arrow)
        if self is log and not done:
            done.append(True)
            other.append(AuditRecord(f"{cat}.taxi.trips", "decision", "launched", "sensor", reason="winner"))
        return files

    monkeypatch.setattr(AuditLog, "_write_files", write_then_lose_race)


@pytest.mark.parametrize("library_retries", ["4", "0"])
def test_a_lost_race_is_retried_with_the_same_files(lake, monkeypatch, caplog, library_retries):
    """With pyiceberg's own retries (default) and with them off, so this module's retry runs."""
    caplog.set_level("WARNING", logger="pyiceberg")
    settings, log = lake
    cat = _catalog_name(settings)
    log.append(_records(cat, 1))
    with log.table().transaction() as tx:
        tx.set_properties({"commit.retry.num-retries": library_retries})
    log._table = None
    other = AuditLog.from_settings(settings)
    _conflict_once(monkeypatch, log, other, cat)
    mine = AuditRecord(f"{cat}.taxi.trips", "decision", "held", "sensor", reason="loser")
    assert log.append(mine) == 1
    reasons = [r.reason for r in log.records()]
    assert sorted(reasons) == ["loser", "winner", "writer active 0"]
    assert _data_files_on_disk(log) == _data_files_referenced(log)
    # The race really happened: the loser committed after the winner, retried by pyiceberg or by us.
    snaps = log.table().metadata.snapshots
    assert [s.summary["icelake.audit.records"] for s in snaps] == ["1", "1", "1"]
    assert snaps[2].parent_snapshot_id == snaps[1].snapshot_id
    pyiceberg_retried = any("retrying (1/" in r.getMessage() for r in caplog.records)
    assert pyiceberg_retried == (library_retries != "0")


def test_a_race_lost_more_often_than_allowed_fails_loudly(lake, monkeypatch):
    settings, log = lake
    cat = _catalog_name(settings)
    log.append(_records(cat, 1))
    with log.table().transaction() as tx:
        tx.set_properties({"commit.retry.num-retries": "0"})
    strict = AuditLog(log.catalog, max_attempts=1)
    _conflict_once(monkeypatch, strict, AuditLog.from_settings(settings), cat)
    with pytest.raises(AuditLogError, match=r"1 records not committed after 1 attempts"):
        strict.append(AuditRecord(f"{cat}.taxi.trips", "decision", "held", "sensor"))


def test_spark_reads_the_audit_table(lake, spark_for):
    settings, log = lake
    cat = _catalog_name(settings)
    full = _full_record(cat)
    log.append([full, *_records(cat, 3)])
    spark = spark_for(settings)
    rows = spark.sql(
        f"SELECT record_id, table_name, kind, decision, trigger, op, partitions, failed_partitions, "
        f"snapshot_before, cost_estimate_bytes, get_json_object(results, '$.rewritten_data_files_count') AS files, "
        f"recorded_at FROM `{cat}`.`icelake`.`audit_log` ORDER BY recorded_at"
    ).collect()
    assert len(rows) == 4
    first = rows[0]
    assert (first.record_id, first.table_name, first.kind, first.decision, first.trigger, first.op) == (
        full.record_id,
        f"{cat}.taxi.trips",
        "op",
        "acted",
        "backfill",
        "rewrite_data_files",
    )
    assert first.partitions == ["d=1", "d=2"] and first.failed_partitions == ["d=2"]
    assert (
        first.snapshot_before == 2**62 + 3 and first.cost_estimate_bytes == 5_000_000 and first.files == "180"
    )
    counts = spark.sql(
        f"SELECT decision, count(*) AS n FROM `{cat}`.`icelake`.`audit_log` GROUP BY decision"
    ).collect()
    assert {r.decision: r.n for r in counts} == {"acted": 1, "deferred": 3}


def test_a_log_of_an_older_version_gains_the_new_columns(lake):
    settings, log = lake
    cat = _catalog_name(settings)
    catalog = open_catalog(settings, cat)
    catalog.create_namespace("icelake")
    old = Schema(*[f for f in AUDIT_SCHEMA.fields if f.name not in ("rolled_back_to", "duration_s")])
    catalog.create_table(("icelake", "audit_log"), schema=old)
    log.append(_full_record(cat))
    table = catalog.load_table(("icelake", "audit_log"))
    assert {"rolled_back_to", "duration_s"} <= set(table.schema().column_names)
    assert table.properties["commit.retry.num-retries"] == "10"
    assert log.records()[0].duration_s == 4.25


def test_a_log_with_a_changed_column_type_is_refused(lake):
    settings, log = lake
    catalog = open_catalog(settings, _catalog_name(settings))
    catalog.create_namespace("icelake")
    catalog.create_table(
        ("icelake", "audit_log"),
        schema=Schema(
            NestedField(1, "record_id", StringType(), required=True),
            NestedField(2, "recorded_at", TimestamptzType(), required=True),
            NestedField(3, "table_name", LongType(), required=False),
        ),
    )
    with pytest.raises(AuditLogError, match="column 'table_name' is long, expected string"):
        log.append(_records(_catalog_name(settings), 1))


def test_history_is_trimmed_but_every_record_stays(lake):
    settings, _ = lake
    cat = _catalog_name(settings)
    log = AuditLog(open_catalog(settings, cat), max_snapshots=4)
    for i in range(7):
        log.append(_records(cat, 1, start=T0 + timedelta(hours=i)))
    assert len(log.table().metadata.snapshots) <= 4
    assert len(log.records()) == 7


def test_disabled_log_writes_nothing(make_lake):
    settings = _new(make_lake, extra={"audit": {"enabled": False}})
    log = AuditLog.from_settings(settings)
    assert log.append(_records(_catalog_name(settings), 2)) == 0
    assert log.table(create=False) is None


@pytest.mark.parametrize(
    "table, message",
    [
        ("audit_log", "expected namespace.table"),
        ("other.audit_log", "must live in the 'icelake' namespace"),
        ("icelake.audit;log", "expected namespace.table"),
        ("icelake..audit", "expected namespace.table"),
    ],
)
def test_bad_identifiers_are_refused(lake, table, message):
    _, log = lake
    with pytest.raises(ValueError, match=message):
        AuditLog(log.catalog, table)


def test_bad_calls_are_refused(lake):
    settings, log = lake
    cat = _catalog_name(settings)
    with pytest.raises(TypeError, match="expected AuditRecord, got dict"):
        log.append([{"table_name": f"{cat}.taxi.trips"}])
    r = _records(cat, 1)[0]
    with pytest.raises(ValueError, match=f"record_id {r.record_id} appears more than once"):
        log.append([r, r])
    with pytest.raises(ValueError, match="since must be a timezone-aware datetime"):
        log.records(since=datetime(2026, 1, 1))
    with pytest.raises(ValueError, match="max_attempts must be >= 1"):
        AuditLog(log.catalog, max_attempts=0)
    assert log.table(create=False) is None  # nothing was written by refused calls


def test_audit_settings(tmp_path, make_lake):
    settings = _new(make_lake, extra={"audit": {"table": "icelake.decisions"}})
    assert AuditLog.from_settings(settings).name == f"{_catalog_name(settings)}.icelake.decisions"
    base = {"catalogs": {"c1": {"type": "sql", "uri": "sqlite:///x.db"}}}
    with pytest.raises(SettingsError, match="audit.catalog: unknown catalog 'nope'"):
        parse_settings({**base, "audit": {"catalog": "nope"}}, "f.yaml", tmp_path)
    with pytest.raises(SettingsError, match="audit.table: .*'icelake' namespace"):
        parse_settings({**base, "audit": {"table": "taxi.audit"}}, "f.yaml", tmp_path)
    with pytest.raises(SettingsError, match="audit.tabel: unknown key"):
        parse_settings({**base, "audit": {"tabel": "icelake.x"}}, "f.yaml", tmp_path)


def test_a_namespace_another_process_creates_at_the_same_moment_is_not_an_error(lake, monkeypatch):
    """pyiceberg's SQL catalog checks, then inserts: the loser of that race gets the database's
    unique-constraint error, not NamespaceAlreadyExistsError (seen in the two-process test)."""
    settings, log = lake
    real = log.catalog.create_namespace

    def racing(namespace, properties=None):
        real(namespace)  # the other process wins ...
        raise RuntimeError("UNIQUE constraint failed: iceberg_namespace_properties.namespace")  # ... we lose

    monkeypatch.setattr(log.catalog, "create_namespace", racing)
    log.append(_records(_catalog_name(settings), 2))
    assert len(log.records()) == 2
