"""The chaos soak's assertions (bench/soak/chaos_soak.py), each a typed result with ``ok``:

1. rows: the writers' ledgers against the table as pyiceberg and as DuckDB read it (committed ids
   present exactly once, deleted ids absent, ids of unknown outcome either, nothing else);
2. files: every file the table's metadata references exists in the store;
3. audit: every maintenance commit left in a table's history (a snapshot naming its run, or any
   ``replace``) is spanned by an audit record of its run (op and validation records' snapshot
   before → after, or a ``recovery/reconciled`` record);
4. runs: none queued or in progress once the product was left alone;
5. health: every table Healthy (every finding passing, the orphan scan included; the retention
   table's far-future finding expected: bench/soak/retention.py);
6. processes: nothing the soak started outlives it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from icelake_assets.types import SNAPSHOT_RUN_ID

SAMPLE = 8  # ids or files named per problem in a report


@dataclass(frozen=True)
class RowCheck:
    table: str
    engine: str
    rows: int
    expected: int  # ids that must be present (committed, not deleted, no delete of unknown outcome)
    lost: tuple[int, ...]  # committed, never deleted, absent
    duplicated: tuple[int, ...]  # present more than once
    resurrected: tuple[int, ...]  # deleted (the delete returned), present
    phantom: tuple[int, ...]  # present, never committed (not in any ledger, or a failed append)
    unknown_present: int  # ids of unknown outcome: present (once) ...
    unknown_absent: int  # ... or absent, both fine

    @property
    def ok(self) -> bool:
        return not (self.lost or self.duplicated or self.resurrected or self.phantom)

    def describe(self) -> str:
        head = (
            f"{self.engine}: {self.rows} rows, {self.expected} expected ids; unknown outcome "
            f"{self.unknown_present} present / {self.unknown_absent} absent"
        )
        problems = [
            f"{len(ids)} {name} (e.g. {', '.join(map(str, ids[:SAMPLE]))})"
            for name, ids in (
                ("lost", self.lost),
                ("duplicated", self.duplicated),
                ("resurrected", self.resurrected),
                ("phantom", self.phantom),
            )
            if ids
        ]
        return head + ("; " + "; ".join(problems) if problems else "")


def check_ids(table: str, engine: str, ledger, counts: Mapping[int, int]) -> RowCheck:
    """``ledger``: a writers.LedgerState (the table's writers merged); ``counts``: id -> rows."""
    maybe = ledger.maybe_appended | ledger.maybe_deleted
    expected = ledger.appended - ledger.deleted - ledger.maybe_deleted
    lost = sorted(i for i in expected if counts.get(i, 0) == 0)
    duplicated = sorted(i for i, c in counts.items() if c > 1)
    resurrected = sorted(i for i in ledger.deleted if counts.get(i, 0) > 0)
    known = ledger.appended | ledger.maybe_appended
    phantom = sorted(i for i, c in counts.items() if c > 0 and i not in known)
    uncertain = (maybe - ledger.deleted) - expected
    present = sum(1 for i in uncertain if counts.get(i, 0) > 0)
    return RowCheck(
        table,
        engine,
        sum(counts.values()),
        len(expected),
        tuple(lost),
        tuple(duplicated),
        tuple(resurrected),
        tuple(phantom),
        present,
        len(uncertain) - present,
    )


def pyiceberg_counts(table) -> dict[int, int]:
    import pyarrow.compute as pc

    ids = table.scan(selected_fields=("id",)).to_arrow()["id"]
    counted = pc.value_counts(ids)
    return {
        int(v): int(c)
        for v, c in zip(counted.field("values").to_pylist(), counted.field("counts").to_pylist(), strict=True)
    }


def duckdb_counts(table, s3_endpoint: str, key: str, secret: str) -> dict[int, int]:
    """The ids as DuckDB's iceberg extension reads the table's current metadata file over S3."""
    import duckdb

    from icelake_assets.maintenance.verify.cross_engine import extension_path

    con = duckdb.connect()
    try:
        for package in ("duckdb_extension_avro", "duckdb_extension_iceberg", "duckdb_extension_httpfs"):
            con.execute(f"LOAD '{extension_path(package)}'")
        quoted = ["'" + v.replace("'", "''") + "'" for v in (s3_endpoint.split("://", 1)[1], key, secret)]
        con.execute(
            f"CREATE SECRET soak (TYPE s3, ENDPOINT {quoted[0]}, KEY_ID {quoted[1]}, SECRET {quoted[2]}, "
            "REGION 'us-east-1', USE_SSL false, URL_STYLE 'path')"
        )
        rows = con.execute(
            "SELECT id, count(*) FROM iceberg_scan(?) GROUP BY id", [table.metadata_location]
        ).fetchall()
    finally:
        con.close()
    return {int(i): int(c) for i, c in rows}


@dataclass(frozen=True)
class FileCheck:
    table: str
    referenced: int
    missing: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return not self.missing


def check_files(name: str, table) -> FileCheck:
    """Every file of every snapshot (manifest lists, manifests, data and delete files) and the
    metadata log: one listing of the table's location, a lookup for anything outside it."""
    from icelake_assets.health.orphans import missing_referenced_files

    checked, missing = missing_referenced_files(table)
    return FileCheck(name, checked, tuple(missing))


@dataclass(frozen=True)
class AuditCheck:
    table: str
    maintenance_commits: int  # in the table's history now (older ones were expired)
    by_own_records: int
    by_reconciled: int
    uncovered: tuple[str, ...]  # what is not in the audit, described

    @property
    def ok(self) -> bool:
        return not self.uncovered


def check_audit(
    name: str, table, records: Sequence, run_windows: Mapping[str, tuple[float, float, str]]
) -> AuditCheck:
    """``records``: every audit record of the lake; ``run_windows``: run id -> (start, end, status),
    to say which run was in flight when an untagged ``replace`` commit was made."""
    from icelake_assets.audit.reconcile import audited_snapshots

    by_run: dict[str, list] = defaultdict(list)
    for record in records:
        if record.run_id and record.table_name == name:
            by_run[record.run_id].append(record)
    commits = own = reconciled = 0
    uncovered = []
    for snap in table.metadata.snapshots:
        summary = snap.summary
        run_id = summary.get(SNAPSHOT_RUN_ID) if summary is not None else None
        operation = summary.operation.value if summary is not None else "?"
        if run_id is None and operation != "replace":
            continue  # a writer's commit
        commits += 1
        if run_id is None:
            at = snap.timestamp_ms / 1000
            during = [r for r, (s, e, _) in run_windows.items() if s <= at <= e]
            uncovered.append(
                f"{operation} snapshot {snap.snapshot_id} names no run (runs in flight then: "
                f"{', '.join(r[:8] for r in during) or 'none'})"
            )
            continue
        mine = by_run.get(run_id, [])
        if snap.snapshot_id in audited_snapshots(table, [r for r in mine if r.kind != "recovery"]):
            own += 1
        elif snap.snapshot_id in audited_snapshots(table, [r for r in mine if r.kind == "recovery"]):
            reconciled += 1
        else:
            status = run_windows.get(run_id, (0, 0, "unknown run"))[2]
            kinds = sorted({f"{r.kind}/{r.decision}" for r in mine})
            uncovered.append(
                f"{operation} snapshot {snap.snapshot_id} of run {run_id} ({status}; its records: "
                f"{', '.join(kinds) or 'none'})"
            )
    return AuditCheck(name, commits, own, reconciled, tuple(uncovered))


@dataclass(frozen=True)
class HealthCheck:
    table: str
    status: str
    score: int
    failing: tuple[str, ...]  # "check: summary" of each finding that does not pass
    # Findings that fail by design (bench/soak/retention.py: far-future rows kept): a WARN caps the
    # status at Warning, which is then the healed state.
    expected: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        healthy = self.status == "Healthy" or (bool(self.expected) and self.status == "Warning")
        return healthy and not self.failing


def check_health(settings, catalog, ref, known) -> HealthCheck:
    """The table's health as ``icelake health --orphans`` computes it."""
    from icelake_assets.operate.table_health import table_health

    health = table_health(settings, catalog, ref, known=lambda: known)
    failing = tuple(f"{f.check}: {f.summary}" for f in health.findings if not f.passed)
    return HealthCheck(str(ref), health.status.value, health.score.score, failing)


@dataclass(frozen=True)
class Outcome:
    """One assertion's verdict and what it found."""

    name: str
    ok: bool
    details: tuple[str, ...] = ()


def outcome(name: str, results: Iterable, describe=lambda r: str(r)) -> Outcome:
    results = list(results)
    return Outcome(name, all(r.ok for r in results), tuple(describe(r) for r in results if not r.ok))
