"""Scan reports ingested exactly once into an append-only Iceberg table beside the audit log,
``<catalog>.icelake.scan_reports`` (docs/layout.md, "Collecting scan reports").

The engines' reporter (layout/reporter/) writes one JSON file per scan into ``scan_reports.dir``; an
ingest lists the complete ``*.json`` files there, appends their reports in one commit, then deletes
the files. Exactly once across a crash: each row keeps the file it came from (``source_file``), and
before appending, files already in the table are skipped (then deleted), so a crash between the append
and the deletions neither loses nor doubles a report. A file that does not parse is moved to
``<dir>/rejected/`` beside a ``.error.txt`` naming the cause: kept for a person, never retried. Rows
older than ``layout.reports_days`` are deleted at most once a day (the table property
``icelake.retention.last-run-ms`` remembers when, in the same commit as the delete). Partitioned by
the day of ingestion, so that the retention's deletes drop whole files."""

from __future__ import annotations

import hashlib
import json
import logging
import time
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta

import pyarrow as pa
from pyarrow import fs as pafs
from pyiceberg.catalog import Catalog
from pyiceberg.exceptions import CommitFailedException, NoSuchNamespaceError, NoSuchTableError
from pyiceberg.expressions import In, LessThan
from pyiceberg.io.pyarrow import PyArrowFileIO
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table import Table
from pyiceberg.transforms import DayTransform
from pyiceberg.types import IntegerType, ListType, LongType, NestedField, StringType, TimestamptzType

from icelake_assets.audit.internal_tables import APPEND_ONLY_PROPERTIES, create_internal_table, trim_history
from icelake_assets.catalog.connection import open_catalog
from icelake_assets.health.storage import filesystem_for, listed_location
from icelake_assets.layout.reports import ScanReport, ScanReportError, parse_scan_report
from icelake_assets.policies.resolve import policy_for
from icelake_assets.settings import Settings
from icelake_assets.types import IcelakeError

_log = logging.getLogger(__name__)

SCHEMA = Schema(
    NestedField(1, "report_id", StringType(), required=True, doc="source_file#index"),
    NestedField(2, "ingested_at", TimestamptzType(), required=True),
    NestedField(3, "reported_at", TimestamptzType(), required=False, doc="the report file's time"),
    NestedField(4, "source_file", StringType(), required=True),
    NestedField(5, "table_name", StringType(), required=True),
    NestedField(6, "snapshot_id", LongType(), required=True),
    NestedField(7, "schema_id", IntegerType(), required=True),
    NestedField(8, "filter_json", StringType(), required=True, doc="Iceberg expression JSON, sanitized"),
    NestedField(9, "projected_field_ids", ListType(20, IntegerType(), element_required=True), required=False),
    NestedField(
        10, "projected_field_names", ListType(21, StringType(), element_required=True), required=False
    ),
    NestedField(11, "result_data_files", LongType(), required=True),
    NestedField(12, "skipped_data_files", LongType(), required=True),
    NestedField(13, "total_data_manifests", LongType(), required=True),
    NestedField(14, "scanned_data_manifests", LongType(), required=True),
    NestedField(15, "skipped_data_manifests", LongType(), required=True),
    NestedField(16, "total_file_size_bytes", LongType(), required=True),
    NestedField(17, "planning_nanos", LongType(), required=True),
    NestedField(18, "metadata_json", StringType(), required=False),
)
SPEC = PartitionSpec(
    PartitionField(source_id=2, field_id=1000, transform=DayTransform(), name="ingested_day")
)
PROPERTIES = {"comment": "icelake_assets scan reports (docs/layout.md)", **APPEND_ONLY_PROPERTIES}
RETENTION_PROPERTY = "icelake.retention.last-run-ms"
REJECTED = "rejected"
_MAX_SNAPSHOTS = 50
_IN_CHUNK = 500  # source files per IN filter
_STALE_PARTIAL_SECONDS = 3600.0  # a reporter's hidden temp file this old was abandoned by a crash


class ScanReportsError(IcelakeError, RuntimeError):
    """The scan reports table or folder cannot be read or written; names which and the cause."""


@dataclass(frozen=True)
class IngestResult:
    """One ingest: report files (or inputs) seen, reports appended, files already in the table
    (a crash after an earlier append), files rejected, and whether the retention ran."""

    table: str
    files: int = 0
    reports: int = 0
    skipped_duplicates: int = 0
    rejected: int = 0
    retention_ran: bool = False
    tables: tuple[str, ...] = ()  # the tables (as the engines named them) that gained reports

    def to_json(self) -> dict[str, object]:
        return asdict(self)


def read_reports(text: str | bytes) -> list[ScanReport]:
    """The reports of one document: a report (``ScanReportParser`` JSON or a ``ReportMetricsRequest``
    body), a JSON array of them, or JSON lines. Raises :class:`ScanReportError` naming what is wrong."""
    text = text.decode() if isinstance(text, bytes) else text
    try:
        doc = json.loads(text)
    except ValueError:
        docs: list = []
        for number, line in enumerate(text.splitlines(), 1):
            if line.strip():
                try:
                    docs.append(json.loads(line))
                except ValueError as err:
                    raise ScanReportError(f"line {number}: not JSON: {err}") from err
    else:
        docs = doc if isinstance(doc, list) else [doc]
    if not docs:
        raise ScanReportError("no report: the input is empty")
    out = []
    for index, item in enumerate(docs):
        try:
            out.append(parse_scan_report(item))
        except ScanReportError as err:
            raise ScanReportError(f"report {index + 1}: {err}" if len(docs) > 1 else str(err)) from err
    return out


def content_source(name: str, content: bytes) -> str:
    """The ``source_file`` of an input given by hand: its name and digest, so loading the same
    content again adds nothing."""
    return f"{name}@sha256:{hashlib.sha256(content).hexdigest()[:16]}"


def _row(report: ScanReport, source: str, index: int, ingested: datetime, reported: datetime | None) -> dict:
    return {
        "report_id": f"{source}#{index}",
        "ingested_at": ingested,
        "reported_at": reported,
        "source_file": source,
        "table_name": report.table_name,
        "snapshot_id": report.snapshot_id,
        "schema_id": report.schema_id,
        "filter_json": json.dumps(report.filter, sort_keys=True),
        "projected_field_ids": list(report.projected_field_ids),
        "projected_field_names": list(report.projected_field_names),
        "result_data_files": report.result_data_files,
        "skipped_data_files": report.skipped_data_files,
        "total_data_manifests": report.total_data_manifests,
        "scanned_data_manifests": report.scanned_data_manifests,
        "skipped_data_manifests": report.skipped_data_manifests,
        "total_file_size_bytes": report.total_file_size_bytes,
        "planning_nanos": report.planning_nanos,
        "metadata_json": json.dumps(dict(report.metadata), sort_keys=True) if report.metadata else None,
    }


class ScanReportStore:
    """The table (created on first use by whichever process gets there first)."""

    def __init__(self, catalog: Catalog, identifier: tuple[str, ...]) -> None:
        self.catalog = catalog
        self.identifier = identifier
        self._table: Table | None = None

    @classmethod
    def from_settings(cls, settings: Settings, catalog: Catalog | None = None) -> ScanReportStore:
        name = settings.scan_reports_catalog()
        ident = tuple(settings.scan_reports.table.split("."))
        return cls(catalog if catalog is not None else open_catalog(settings, name), ident)

    @property
    def name(self) -> str:
        return ".".join((self.catalog.name, *self.identifier))

    def table(self, create: bool = True) -> Table | None:
        try:
            if self._table is not None:
                return self._table.refresh()
            self._table = self.catalog.load_table(self.identifier)
        except (NoSuchTableError, NoSuchNamespaceError):
            if not create:
                return None
            try:
                self._table = create_internal_table(self.catalog, self.identifier, SCHEMA, SPEC, PROPERTIES)
            except Exception as err:
                raise ScanReportsError(f"scan reports table {self.name} cannot be created: {err}") from err
        except Exception as err:
            raise ScanReportsError(f"scan reports table {self.name} cannot be loaded: {err}") from err
        return self._table

    def known_sources(self, sources: Iterable[str]) -> set[str]:
        """Which of ``sources`` the table already holds rows of."""
        names = sorted(set(sources))
        tbl = self.table(create=False)
        if tbl is None or not names or tbl.current_snapshot() is None:
            return set()
        found: set[str] = set()
        for start in range(0, len(names), _IN_CHUNK):
            chunk = In(term="source_file", literals=names[start : start + _IN_CHUNK])
            found.update(
                tbl.scan(row_filter=chunk, selected_fields=("source_file",))
                .to_arrow()["source_file"]
                .to_pylist()
            )
        return found

    def append(self, rows: Sequence[dict]) -> None:
        if not rows:
            return
        tbl = self.table()
        assert tbl is not None
        try:
            tbl.append(pa.Table.from_pylist(list(rows), schema=tbl.schema().as_arrow()))
        except CommitFailedException as err:
            raise ScanReportsError(
                f"scan reports table {self.name}: {len(rows)} reports not committed: {err}"
            ) from err
        trim_history(tbl, _MAX_SNAPSHOTS)

    def apply_retention(self, days: int, now: float) -> bool:
        """Delete rows ingested more than ``days`` ago, unless done in the last 24 hours; whether it ran."""
        tbl = self.table(create=False)
        if tbl is None:
            return False
        last = int(tbl.properties.get(RETENTION_PROPERTY, "0") or 0)
        if now * 1000 - last < 24 * 3600 * 1000:
            return False
        cutoff = datetime.fromtimestamp(now, tz=UTC) - timedelta(days=days)
        try:
            with tbl.transaction() as tx:
                if tbl.current_snapshot() is not None:
                    with warnings.catch_warnings():  # "did not match any records": the usual case
                        warnings.simplefilter("ignore", UserWarning)
                        tx.delete(LessThan(term="ingested_at", value=cutoff))
                tx.set_properties({RETENTION_PROPERTY: str(int(now * 1000))})
        except CommitFailedException:
            return False  # another process ran it meanwhile, or will on its next ingest
        return True


def reports_days(settings: Settings) -> int:
    """The lake's ``layout.reports_days`` (one table holds every table's reports)."""
    return policy_for(settings, None).layout.reports_days


def ingest_documents(
    store: ScanReportStore, inputs: Sequence[tuple[str, bytes, float | None]], now: float | None = None
) -> IngestResult:
    """Append the reports of ``inputs`` (``source_file``, content, reported time) whose source is not
    in the table yet; raises :class:`ScanReportError` (nothing appended) when one does not parse."""
    now = time.time() if now is None else now
    ingested = datetime.fromtimestamp(now, tz=UTC)
    known = store.known_sources(source for source, _, _ in inputs)
    rows: list[dict] = []
    for source, content, reported in inputs:
        if source in known:
            continue
        try:
            reports = read_reports(content)
        except ScanReportError as err:
            raise ScanReportError(f"{source}: {err}") from err
        at = datetime.fromtimestamp(reported, tz=UTC) if reported is not None else None
        rows.extend(_row(r, source, i, ingested, at) for i, r in enumerate(reports))
    store.append(rows)
    skipped = sum(1 for source, _, _ in inputs if source in known)
    tables = tuple(sorted({row["table_name"] for row in rows}))
    return IngestResult(
        store.name, files=len(inputs), reports=len(rows), skipped_duplicates=skipped, tables=tables
    )


class ReportFolder:
    """``scan_reports.dir`` through pyarrow's file system, with the catalog's ``s3.*`` properties."""

    def __init__(self, uri: str, properties: dict[str, str]) -> None:
        self.uri = uri.rstrip("/")
        self.fs, self.root, self.prefix = filesystem_for(PyArrowFileIO(properties), self.uri)

    def complete_files(self, now: float, limit: int) -> list[pafs.FileInfo]:
        """Up to ``limit`` complete report files, oldest folder first; abandoned temp files removed."""
        selector = pafs.FileSelector(self.root, recursive=True, allow_not_found=True)
        found = []
        for info in self.fs.get_file_info(selector):
            relative = info.path[len(self.root.rstrip("/")) :].lstrip("/")
            if info.type != pafs.FileType.File or relative.split("/")[0] == REJECTED:
                continue
            if info.base_name.startswith("."):
                if info.mtime is not None and now - info.mtime.timestamp() > _STALE_PARTIAL_SECONDS:
                    self._quietly(self.fs.delete_file, info.path)
            elif info.base_name.endswith(".json"):
                found.append(info)
        return sorted(found, key=lambda i: i.path)[:limit]

    def location(self, path: str) -> str:
        return listed_location(self.prefix, path)

    def read(self, path: str) -> bytes:
        with self.fs.open_input_stream(path) as stream:
            return stream.read()

    def reject(self, path: str, content: bytes, cause: str) -> None:
        """Kept under rejected/ with its cause beside it, then removed from where it was."""
        relative = path[len(self.root.rstrip("/")) :].lstrip("/")
        target = f"{self.root.rstrip('/')}/{REJECTED}/{relative}"
        self.fs.create_dir(target.rsplit("/", 1)[0], recursive=True)
        with self.fs.open_output_stream(target) as out:
            out.write(content)
        with self.fs.open_output_stream(target + ".error.txt") as out:
            out.write(cause.encode() + b"\n")
        self.fs.delete_file(path)

    def delete(self, paths: Iterable[str]) -> None:
        for path in paths:
            self._quietly(self.fs.delete_file, path)

    @staticmethod
    def _quietly(action, path: str) -> None:
        try:
            action(path)
        except FileNotFoundError:
            pass  # removed meanwhile (another ingest)


def ingest_dir(
    settings: Settings,
    store: ScanReportStore | None = None,
    now: float | None = None,
    max_files: int = 5000,
) -> IngestResult:
    """One ingest of ``scan_reports.dir`` (module docstring), then the retention when due."""
    uri = settings.scan_reports.uri
    if uri is None:
        raise ScanReportsError("scan_reports.dir is not set: there is no folder to ingest")
    now = time.time() if now is None else now
    store = store or ScanReportStore.from_settings(settings)
    props = {
        k: v
        for k, v in settings.catalog_properties(settings.scan_reports_catalog()).items()
        if isinstance(v, str)
    }
    try:
        folder = ReportFolder(uri, props)
        infos = folder.complete_files(now, max_files)
    except OSError as err:
        raise ScanReportsError(f"scan_reports.dir {uri} cannot be listed: {err}") from err
    inputs, rejected = [], 0
    for info in infos:
        try:
            content = folder.read(info.path)
        except FileNotFoundError:
            continue  # ingested and deleted by another ingest meanwhile
        try:
            read_reports(content)
        except ScanReportError as err:
            _log.warning(f"scan report {folder.location(info.path)} rejected: {err}")
            folder.reject(info.path, content, str(err))
            rejected += 1
            continue
        mtime = info.mtime.timestamp() if info.mtime is not None else None
        inputs.append((folder.location(info.path), content, mtime))
    result = ingest_documents(store, inputs, now)
    # Only after the commit: a crash before it leaves every file for the next ingest.
    folder.delete(info.path for info in infos if folder.location(info.path) in {s for s, _, _ in inputs})
    ran = store.apply_retention(reports_days(settings), now)
    return IngestResult(
        store.name,
        files=len(infos),
        reports=result.reports,
        skipped_duplicates=result.skipped_duplicates,
        rejected=rejected,
        retention_ran=ran,
        tables=result.tables,
    )
