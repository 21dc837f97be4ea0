"""Every table of every configured catalog, with where it lives and writes: what orphan removal must
never touch. Include/exclude patterns do not apply (an excluded table's files are still its own), and
a catalog that cannot be listed is an error: cleaning blind is never the fallback."""

from __future__ import annotations

import threading
from collections.abc import Callable

from pyiceberg.catalog import Catalog
from pyiceberg.catalog.sql import IcebergTables, SqlCatalog
from sqlalchemy import select
from sqlalchemy.orm import Session

from icelake_assets.catalog.connection import CatalogUnavailableError, TableRef, open_catalog
from icelake_assets.catalog.discovery import _namespaces
from icelake_assets.settings import Settings
from icelake_assets.types import KnownTable

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


def _catalog_tables(name: str, catalog: Catalog) -> list[KnownTable]:
    rows: list[tuple[tuple[str, ...], str | None]]
    if isinstance(catalog, SqlCatalog):
        rows = _sql_rows(catalog)
    else:
        rows = [
            (tuple(ident), None)
            for ns in dict.fromkeys(_namespaces(catalog))
            for ident in catalog.list_tables(ns)
        ]
    out = []
    for ident, metadata_location in rows:
        with _LOCK:
            cached = _BY_METADATA.get(metadata_location) if metadata_location else None
        if cached is None:
            table = catalog.load_table(ident)
            cached = (table.metadata.location, dict(table.metadata.properties))
            with _LOCK:
                if len(_BY_METADATA) >= _MAX_CACHED:
                    _BY_METADATA.clear()
                _BY_METADATA[table.metadata_location] = cached
        out.append(KnownTable(".".join((name, *ident)), cached[0], cached[1]))
    return out


def known_tables(settings: Settings, catalog_fn: Callable[[str], Catalog] | None = None) -> list[KnownTable]:
    """Every table of every configured catalog (``catalog_fn`` opens one; default: a new connection)."""
    open_fn = catalog_fn or (lambda n: open_catalog(settings, n))
    found: list[KnownTable] = []
    for name in settings.catalogs:
        try:
            found.extend(_catalog_tables(name, open_fn(name)))
        except CatalogUnavailableError as err:
            raise CatalogUnavailableError(
                f"cannot list every known table, so no orphan may be removed: {err}"
            ) from err
        except Exception as err:
            raise CatalogUnavailableError(
                f"catalog {name!r}: cannot list its tables, so no orphan may be "
                f"removed: {type(err).__name__}: {err}"
            ) from err
    return found


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
