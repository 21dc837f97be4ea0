"""Every table of every configured catalog, with where it lives and writes: what orphan removal must
never touch. Include/exclude patterns do not apply (an excluded table's files are still its own).

A table whose metadata cannot be read, or a catalog that cannot be listed, does not stop the listing:
it is returned as unlisted, with where it probably lives (its metadata folder, its catalog's
warehouse) and the cause, so that orphan removal skips only the tables it may overlap
(health/orphans.py) and never cleans blind."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import PurePosixPath

from pyiceberg.catalog import Catalog
from pyiceberg.catalog.sql import IcebergTables, SqlCatalog
from sqlalchemy import select
from sqlalchemy.orm import Session

from icelake_assets.catalog.connection import TableRef, open_catalog
from icelake_assets.catalog.discovery import all_namespaces
from icelake_assets.causes import describe
from icelake_assets.settings import Settings
from icelake_assets.types import KnownTable, KnownTables, UnlistedTable

# metadata.json files are immutable: a table whose metadata location did not change keeps its
# location and properties, so a SQL catalog costs one query plus the tables that changed.
_BY_METADATA: dict[str, tuple[str, dict[str, str]]] = {}
_LOCK = threading.Lock()
_MAX_CACHED = 100_000


def _sql_rows(catalog: SqlCatalog) -> list[tuple[tuple[str, ...], str | None]]:
    with Session(catalog.engine) as session:
        rows = session.execute(
            select(
                IcebergTables.table_namespace, IcebergTables.table_name, IcebergTables.metadata_location
            ).where(IcebergTables.catalog_name == catalog.name)
        )
        return [((*ns.split("."), name), location) for ns, name, location in rows]


def _metadata_hints(metadata_location: str | None) -> list[str]:
    """Where a table whose metadata.json cannot be read probably lives: the parent of its metadata
    folder (Iceberg's default layout), else the folder holding the metadata file."""
    if not metadata_location:
        return []
    scheme, sep, path = metadata_location.rpartition("://")
    folder = PurePosixPath(path).parent
    guess = folder.parent if folder.name == "metadata" else folder
    return [f"{scheme}{sep}{guess}"]


def _catalog_tables(name: str, catalog: Catalog) -> tuple[list[KnownTable], list[UnlistedTable]]:
    rows: list[tuple[tuple[str, ...], str | None]]
    if isinstance(catalog, SqlCatalog):
        rows = _sql_rows(catalog)
    else:
        rows = [
            (tuple(ident), None)
            for ns in dict.fromkeys(all_namespaces(catalog))
            for ident in catalog.list_tables(ns)
        ]
    found, unlisted = [], []
    for ident, metadata_location in rows:
        full = ".".join((name, *ident))
        with _LOCK:
            cached = _BY_METADATA.get(metadata_location) if metadata_location else None
        if cached is None:
            try:
                table = catalog.load_table(ident)
            except Exception as err:  # this table only: unreadable metadata, a dropped file, no access
                ref = TableRef(name, tuple(ident[:-1]), ident[-1])
                hints = _metadata_hints(metadata_location) + default_locations(catalog, ref)
                unlisted.append(UnlistedTable(full, describe(err), tuple(dict.fromkeys(hints))))
                continue
            cached = (table.metadata.location, dict(table.metadata.properties))
            with _LOCK:
                if len(_BY_METADATA) >= _MAX_CACHED:
                    _BY_METADATA.clear()
                _BY_METADATA[table.metadata_location] = cached
        found.append(KnownTable(full, cached[0], cached[1]))
    return found, unlisted


def _catalog_hints(settings: Settings, name: str) -> tuple[str, ...]:
    """Where a catalog that cannot be listed puts its tables: its warehouse when that is a path (a
    REST catalog's names a server-side warehouse: its tables could be anywhere)."""
    props = settings.catalogs.get(name) or {}
    warehouse = str(props.get("warehouse") or "")
    if props.get("type") == "rest" or not warehouse:
        return ()
    return (warehouse,)


def known_tables(settings: Settings, catalog_fn: Callable[[str], Catalog] | None = None) -> KnownTables:
    """Every table of every configured catalog (``catalog_fn`` opens one; default: a new connection);
    the tables and catalogs that cannot be read are in ``unlisted``, with their cause."""
    open_fn = catalog_fn or (lambda n: open_catalog(settings, n))
    found: list[KnownTable] = []
    unlisted: list[UnlistedTable] = []
    for name in settings.catalogs:
        try:
            tables, unreadable = _catalog_tables(name, open_fn(name))
        except Exception as err:
            unlisted.append(
                UnlistedTable(
                    f"catalog {name}",
                    f"its tables cannot be listed: {describe(err)}",
                    _catalog_hints(settings, name),
                )
            )
            continue
        found += tables
        unlisted += unreadable
    return KnownTables(tuple(found), tuple(unlisted))


def default_locations(catalog: Catalog, ref: TableRef) -> list[str]:
    """Where ``ref``'s catalog puts a table created without a location: the namespace's ``location``,
    else its ``warehouse`` in pyiceberg's (``ns/t``, Hive-style ``ns.db/t``) or Iceberg Java's
    (``a/b/t``) layout. Empty when neither is known (e.g. a REST catalog decides server-side)."""
    if type(catalog).__name__ == "RestCatalog":  # "warehouse" names a server-side warehouse, not a path
        return []
    out = []
    try:
        ns_location = catalog.load_namespace_properties(ref.namespace).get("location")
    except Exception:  # catalogs without namespace properties: only the warehouse tells
        ns_location = None
    if ns_location:
        out.append(f"{ns_location.rstrip('/')}/{ref.name}")
    warehouse = (catalog.properties.get("warehouse") or "").rstrip("/")
    if warehouse:
        dotted = ".".join(ref.namespace)
        out += [
            f"{warehouse}/{dotted}/{ref.name}",
            f"{warehouse}/{dotted}.db/{ref.name}",
            f"{warehouse}/{'/'.join(ref.namespace)}/{ref.name}",
        ]
    return list(dict.fromkeys(out))
