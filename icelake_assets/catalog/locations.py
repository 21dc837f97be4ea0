"""Current metadata locations of many tables at once: how a sensor tells, for nearly nothing, which
tables changed since its last tick (an unchanged metadata location means an unchanged table).

A SQL catalog answers for every table in one query. Other catalogs (REST, Hive, Glue) answer one table
per request: their tables are loaded by at most ``concurrency`` workers at once, each with its own
client of the catalog (pyiceberg's RestCatalog keeps one requests Session, whose thread safety
requests does not promise (psf/requests#2766: one Session per thread), and whose connection pool
keeps 10 connections). A REST worker asks for
``snapshot-loading-mode: refs`` (the spec's ``snapshots=refs``: only the snapshots branches and tags
point at), which lightens the answer of a table with a long history; the metadata location is the
same either way."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from pyiceberg.catalog import Catalog
from pyiceberg.catalog.rest import SNAPSHOT_LOADING_MODE, RestCatalog
from pyiceberg.catalog.sql import IcebergTables, SqlCatalog
from pyiceberg.table import Table
from sqlalchemy import select
from sqlalchemy.orm import Session

from icelake_assets.catalog.connection import (
    CatalogUnavailableError,
    TableMissingError,
    TableRef,
    TableUnreadableError,
    error_text,
    load_table,
)
from icelake_assets.types import IcelakeError

T = TypeVar("T")
R = TypeVar("R")

DEFAULT_CONCURRENCY = 8  # automation.catalog_concurrency's default


def metadata_file(location: str | None) -> str:
    """A metadata location's file name (what tells two versions apart, short enough to show)."""
    return (location or "").rsplit("/", 1)[-1]


def bounded_map(fn: Callable[[T], R], items: Iterable[T], concurrency: int) -> list[R]:
    """``[fn(x) for x in items]`` with at most ``concurrency`` calls at once, results in input order.
    The first failure (in input order) is raised once the calls under way end; calls not started yet
    are cancelled. ``concurrency`` 1 calls ``fn`` in this thread, one item after the other."""
    if concurrency < 1:
        raise ValueError(f"concurrency must be at least 1, not {concurrency}")
    todo = list(items)
    if concurrency == 1 or len(todo) <= 1:
        return [fn(x) for x in todo]
    pool = ThreadPoolExecutor(max_workers=min(concurrency, len(todo)), thread_name_prefix="icelake-catalog")
    try:
        futures = [pool.submit(fn, x) for x in todo]
        return [f.result() for f in futures]
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def metadata_locations(
    catalog: Catalog, refs: list[TableRef], concurrency: int = DEFAULT_CONCURRENCY
) -> dict[TableRef, str | None]:
    """Each ref's current metadata location; None for a table that no longer exists. A catalog that
    cannot be reached raises CatalogUnavailableError naming it (whichever worker met it first)."""
    if isinstance(catalog, SqlCatalog):
        return _sql_locations(catalog, refs)
    if concurrency == 1 or len(refs) <= 1:
        return {ref: _location(catalog, ref) for ref in refs}
    clients = _WorkerClients(catalog)
    try:
        found = bounded_map(lambda ref: _location(clients.get(ref), ref), refs, concurrency)
    finally:
        clients.close()
    return dict(zip(refs, found, strict=True))


def load_tables(
    catalog: Catalog, refs: list[TableRef], concurrency: int = DEFAULT_CONCURRENCY
) -> dict[TableRef, Table]:
    """:meth:`TableLoader.load` once."""
    loader = TableLoader(catalog, concurrency)
    try:
        return loader.load(refs)
    finally:
        loader.close()


class TableLoader:
    """Loads tables of one catalog whole (every snapshot) by at most ``concurrency`` worker threads,
    each with its own client; threads and clients are kept until :meth:`close`, so a caller asking a
    chunk at a time (the sensor's prefetch) opens each client once. A SQL catalog, or concurrency 1:
    one table after the other, through the catalog itself."""

    def __init__(self, catalog: Catalog, concurrency: int = DEFAULT_CONCURRENCY) -> None:
        self.catalog = catalog
        self.clients: _WorkerClients | None = None
        self.pool: ThreadPoolExecutor | None = None
        self.parallel = not isinstance(catalog, SqlCatalog) and concurrency > 1
        if self.parallel:
            self.clients = _WorkerClients(catalog, refs_only=False)
            self.pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="icelake-catalog")

    def load(self, refs: list[TableRef]) -> dict[TableRef, Table]:
        """The tables of ``refs`` that load. A table that is missing or unreadable, or a catalog that
        is down, is left out: the caller's own load of it reports the cause as before."""
        clients, pool = self.clients, self.pool
        if clients is None or pool is None:
            found = [_loaded(lambda _ref: self.catalog, ref) for ref in refs]
        else:
            found = list(pool.map(lambda ref: _loaded(clients.get, ref), refs))
        return {ref: table for ref, table in zip(refs, found, strict=True) if table is not None}

    def close(self) -> None:
        """The tables loaded keep their client: a later request through it opens a new connection."""
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)
        if self.clients is not None:
            self.clients.close()


def _loaded(client: Callable[[TableRef], Catalog], ref: TableRef) -> Table | None:
    try:
        return load_table(client(ref), ref)
    except IcelakeError:  # missing, unreadable, a catalog that is down: the caller reads it again
        return None


def _location(catalog: Catalog, ref: TableRef) -> str | None:
    try:
        return load_table(catalog, ref).metadata_location
    except TableMissingError:
        return None


class _WorkerClients:
    """One client of the catalog per worker thread, opened on the worker's first table with the
    catalog's own properties (a REST client also fetches the server's config, and its token when it
    has credentials), closed when the sweep ends."""

    def __init__(self, catalog: Catalog, refs_only: bool = True) -> None:
        self.catalog = catalog
        self.properties = dict(catalog.properties)
        if refs_only and isinstance(catalog, RestCatalog):
            self.properties[SNAPSHOT_LOADING_MODE] = "refs"
        self.local = threading.local()
        self.opened: list[Catalog] = []
        self.lock = threading.Lock()

    def get(self, ref: TableRef) -> Catalog:
        client: Catalog | None = getattr(self.local, "client", None)
        if client is None:
            try:
                client = type(self.catalog)(self.catalog.name, **self.properties)
            except Exception as err:  # the same error a load through the catalog itself raises
                cause = error_text(err, self.properties)
                raise TableUnreadableError(
                    f"catalog {ref.catalog!r} failed to load table {ref}: {cause}",
                    catalog=ref.catalog,
                    cause=cause,
                ) from err
            self.local.client = client
            with self.lock:
                self.opened.append(client)
        return client

    def close(self) -> None:
        for client in self.opened:
            client.close()


def _sql_locations(catalog: SqlCatalog, refs: list[TableRef]) -> dict[TableRef, str | None]:
    wanted = {(".".join(r.namespace), r.name): r for r in refs}
    found: dict[TableRef, str | None] = dict.fromkeys(refs)
    try:
        with Session(catalog.engine) as session:
            rows = session.execute(
                select(
                    IcebergTables.table_namespace,
                    IcebergTables.table_name,
                    IcebergTables.metadata_location,
                ).where(IcebergTables.catalog_name == catalog.name)
            )
            for namespace, name, location in rows:
                ref = wanted.get((namespace, name))
                if ref is not None:
                    found[ref] = location
    except Exception as err:
        raise CatalogUnavailableError(
            f"catalog {catalog.name!r}: cannot list metadata locations: {err}"
        ) from err
    return found
