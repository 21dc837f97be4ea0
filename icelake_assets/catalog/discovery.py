"""Discovery: every table of each configured catalog, after the include/exclude patterns."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass, field

from pyiceberg.catalog import Catalog
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.table import Table

from icelake_assets.catalog.connection import (
    CatalogUnavailableError,
    TableMissingError,
    TableRef,
    TableUnreadableError,
    error_text,
    load_table,
    open_catalog,
)
from icelake_assets.catalog.locations import metadata_locations
from icelake_assets.partitions.layout import PartitionLayout, partition_layout
from icelake_assets.settings import Settings

_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class DiscoveredTable:
    """A table and the metadata shown on its asset."""

    ref: TableRef
    location: str
    format_version: int
    partition_spec: str
    sort_order: str
    current_snapshot_id: int | None
    properties: dict[str, str] = field(default_factory=dict)
    partition_fields: tuple[str, ...] = ()
    # Specs, partition dimensions and earliest time partition: the table's Dagster partitions.
    layout: PartitionLayout | None = None

    @classmethod
    def from_table(cls, ref: TableRef, table: Table) -> DiscoveredTable:
        md = table.metadata
        spec = table.spec()
        schema = table.schema()
        fields = []
        for f in spec.fields:
            src = schema.find_column_name(f.source_id)
            fields.append(f"{f.transform}({src})" if str(f.transform) != "identity" else str(src))
        order = table.sort_order()
        sort = ", ".join(
            f"{f.transform}({schema.find_column_name(f.source_id)}) {f.direction.name.lower()}"
            if str(f.transform) != "identity"
            else f"{schema.find_column_name(f.source_id)} {f.direction.name.lower()}"
            for f in order.fields
        )
        snap = table.current_snapshot()
        return cls(
            ref=ref,
            location=md.location,
            format_version=md.format_version,
            partition_spec=", ".join(fields) or "unpartitioned",
            sort_order=sort or "unsorted",
            current_snapshot_id=snap.snapshot_id if snap else None,
            properties=dict(md.properties),
            partition_fields=tuple(fields),
            layout=partition_layout(table),
        )


def all_namespaces(catalog: Catalog, parent: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    """All namespaces, nested ones included (depth-first)."""
    try:
        children = [tuple(ns) for ns in catalog.list_namespaces(parent)]
    except Exception:
        if not parent:
            raise
        children = []  # catalogs without nested namespaces may refuse a parent
    for ns in children:
        if len(ns) > len(parent) and ns[: len(parent)] == parent:
            yield ns
            yield from all_namespaces(catalog, ns)


def list_table_refs(settings: Settings, catalog: Catalog, name: str) -> list[TableRef]:
    """The selected tables of catalog ``name`` by name only (one listing per namespace, none loaded)."""
    try:
        refs = []
        for ns in list(dict.fromkeys(all_namespaces(catalog))):
            for ident in catalog.list_tables(ns):
                ref = TableRef(name, tuple(ident[:-1]), ident[-1])
                if settings.selects(name, ref.namespace_name, ref.name):
                    refs.append(ref)
        return refs
    except CatalogUnavailableError:
        raise
    except Exception as err:  # a server's error may echo what it was sent: redacted
        cause = error_text(err, settings.catalog_properties(name))
        raise CatalogUnavailableError.of(name, f"cannot be listed: {cause}") from err


@dataclass(frozen=True)
class DiscoveryProblem:
    """A catalog that could not be listed (``table`` None) or a table whose metadata could not be
    read. ``cause`` follows the subject in one line, secrets redacted: ``catalog 'x' cannot be
    opened: ...``, ``table x.ns.t cannot be read: ...``."""

    catalog: str
    cause: str
    table: TableRef | None = None

    def __str__(self) -> str:
        what = f"table {self.table}" if self.table else f"catalog {self.catalog!r}"
        return f"{what} {self.cause}"

    @classmethod
    def from_error(
        cls,
        catalog: str,
        err: BaseException,
        table: TableRef | None = None,
        props: dict[str, str] | None = None,
    ) -> DiscoveryProblem:
        """The problem ``err`` says catalog ``catalog`` (or its ``table``) has; ``props``: the
        catalog's properties, whose secrets an unexpected error's message must not show."""
        if isinstance(err, TableMissingError):
            return cls(catalog, "does not exist (any more) in its catalog", table)
        if table is not None and isinstance(err, TableUnreadableError):
            return cls(catalog, f"cannot be read: {err.cause}", table)
        if isinstance(err, CatalogUnavailableError):
            cause = err.cause if err.catalog == catalog else str(err)
            return cls(
                catalog, cause if table is None else f"cannot be read: catalog {catalog!r} {cause}", table
            )
        return cls(catalog, f"cannot be read: {error_text(err, props or {})}", table)


@dataclass(frozen=True)
class LakeDiscovery:
    """What discovery found, and what it could not read: one catalog or table at fault never hides
    the others."""

    tables: tuple[DiscoveredTable, ...] = ()
    problems: tuple[DiscoveryProblem, ...] = ()

    @property
    def down_catalogs(self) -> tuple[DiscoveryProblem, ...]:
        return tuple(p for p in self.problems if p.table is None)

    @property
    def unreadable_tables(self) -> tuple[DiscoveryProblem, ...]:
        return tuple(p for p in self.problems if p.table is not None)


def _metadata_file(catalog: Catalog, ref: TableRef) -> str | None:
    """Where an unreadable table's metadata.json is, when the catalog says so without reading it
    (a SQL catalog: its row)."""
    if not isinstance(catalog, SqlCatalog):
        return None
    try:
        return metadata_locations(catalog, [ref]).get(ref)
    except Exception:
        return None  # the cause already reported says more


def _discover_table(catalog: Catalog, ref: TableRef) -> DiscoveredTable | DiscoveryProblem:
    try:
        return DiscoveredTable.from_table(ref, load_table(catalog, ref))
    except Exception as err:
        problem = DiscoveryProblem.from_error(ref.catalog, err, ref, dict(catalog.properties))
        if isinstance(err, TableUnreadableError) and (path := _metadata_file(catalog, ref)):
            problem = DiscoveryProblem(ref.catalog, f"{problem.cause} (metadata file {path})", ref)
        return problem


def discover_table(catalog: Catalog, ref: TableRef) -> DiscoveredTable | None:
    """One table's discovered facts; None (logged) when its metadata cannot be read or it was dropped
    meanwhile: one unreadable table must not stop the code location."""
    found = _discover_table(catalog, ref)
    if isinstance(found, DiscoveryProblem):
        _log.warning("%s: left out", found)
        return None
    return found


def discover_lake(settings: Settings) -> LakeDiscovery:
    """Every selected table of every configured catalog, sorted by name, and the catalogs and tables
    that could not be read: a catalog that is down is an error for its tables only. Nothing is logged
    here: the caller reports the problems where its user looks (a Dagster warning and the lake
    overview, or ``icelake health``'s error lines)."""
    found: list[DiscoveredTable] = []
    problems: list[DiscoveryProblem] = []
    for name in settings.catalogs:
        try:
            catalog = open_catalog(settings, name)
            refs = list_table_refs(settings, catalog, name)
        except CatalogUnavailableError as err:
            problems.append(DiscoveryProblem.from_error(name, err))
            continue
        for ref in refs:
            result = _discover_table(catalog, ref)
            if isinstance(result, DiscoveredTable):
                found.append(result)
            else:
                problems.append(result)
    return LakeDiscovery(tuple(sorted(found, key=lambda t: t.ref)), tuple(problems))


def discover_tables(settings: Settings) -> list[DiscoveredTable]:
    """Every selected table that could be read (see :func:`discover_lake` for what could not)."""
    return list(discover_lake(settings).tables)
