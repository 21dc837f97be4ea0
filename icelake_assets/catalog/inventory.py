"""The table inventory: what discovery found, cached in a JSON file so that a process loading the
definitions (code server, run worker, ``dagster dev``) does not list and load every table again.

Discovery of 10,000 tables reads 10,000 metadata files; the cached inventory is one file. It is
written by a load that discovered (cold) and refreshed by the maintenance sensor when the set of
tables changes (:func:`refresh`); a load uses it while its fingerprint matches the settings that
select tables (catalogs and include/exclude patterns) and it is younger than
``automation.inventory_max_age_hours``. Where it lives: ``$ICELAKE_INVENTORY`` (a file path, or
``off``), else ``$DAGSTER_HOME/icelake/inventory.json``, else nowhere (no caching).

Structural facts only (location, format version, spec, sort order, properties, partition layout):
a table's health is never read from here.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from icelake_assets.catalog.connection import TableRef, open_catalog
from icelake_assets.catalog.discovery import (
    DiscoveredTable,
    DiscoveryProblem,
    discover_lake,
    discover_table,
    list_table_refs,
)
from icelake_assets.partitions.layout import LayoutField, PartitionLayout
from icelake_assets.settings import Settings
from icelake_assets.types import IcelakeError

_log = logging.getLogger(__name__)

INVENTORY_ENV = "ICELAKE_INVENTORY"
FORMAT = 1  # bump when the file's shape changes: older files are rediscovered


class InventoryError(IcelakeError):
    """The inventory file exists but cannot be used (unreadable, another format)."""


def inventory_path() -> Path | None:
    """Where the inventory is cached (None: not cached)."""
    configured = os.environ.get(INVENTORY_ENV, "").strip()
    if configured.lower() == "off":
        return None
    if configured:
        return Path(configured)
    home = os.environ.get("DAGSTER_HOME")
    return Path(home) / "icelake" / "inventory.json" if home else None


def fingerprint(settings: Settings) -> str:
    """What decides which tables exist for these settings: catalogs (hashed: properties may hold
    secrets, the file must not) and the include/exclude patterns."""
    basis = {
        "catalogs": {name: settings.catalog_properties(name) for name in sorted(settings.catalogs)},
        "include": list(settings.tables.include),
        "exclude": list(settings.tables.exclude),
        "format": FORMAT,
    }
    return hashlib.sha256(json.dumps(basis, sort_keys=True, default=str).encode()).hexdigest()


# -- (de)serialization ------------------------------------------------------------------------------


def _field_from(d: dict[str, Any]) -> LayoutField:
    return LayoutField(**{**d, "source": tuple(d["source"])})


def _layout_from(d: dict[str, Any] | None) -> PartitionLayout | None:
    if d is None:
        return None
    return PartitionLayout(
        table=d["table"],
        spec_id=d["spec_id"],
        fields=tuple(_field_from(f) for f in d["fields"]),
        specs={int(k): tuple(_field_from(f) for f in v) for k, v in d["specs"].items()},
        live_spec_ids=tuple(d["live_spec_ids"]),
    )


def table_to_dict(t: DiscoveredTable) -> dict[str, Any]:
    d = asdict(t)
    d["ref"] = [t.ref.catalog, list(t.ref.namespace), t.ref.name]
    if t.layout is not None:
        d["layout"]["specs"] = {str(k): v for k, v in d["layout"]["specs"].items()}
    return d


def table_from_dict(d: dict[str, Any]) -> DiscoveredTable:
    catalog, namespace, name = d["ref"]
    return DiscoveredTable(
        ref=TableRef(catalog, tuple(namespace), name),
        location=d["location"],
        format_version=d["format_version"],
        partition_spec=d["partition_spec"],
        sort_order=d["sort_order"],
        current_snapshot_id=d["current_snapshot_id"],
        properties=dict(d["properties"]),
        partition_fields=tuple(d["partition_fields"]),
        layout=_layout_from(d["layout"]),
    )


def dumps(tables: Iterable[DiscoveredTable]) -> str:
    """The tables as JSON (also the definitions' reconstruction metadata for run workers)."""
    return json.dumps([table_to_dict(t) for t in tables], separators=(",", ":"))


def loads(text: str) -> list[DiscoveredTable]:
    return [table_from_dict(d) for d in json.loads(text)]


# -- the cache file ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Inventory:
    tables: list[DiscoveredTable]
    written_at: float  # epoch seconds
    source: str  # "cache" (read from the file) or "discovery"
    # What discovery could not read (a down catalog, an unreadable table); never cached, so the next
    # load tries them again.
    problems: tuple[DiscoveryProblem, ...] = ()


def read(settings: Settings, path: Path, any_age: bool = False) -> Inventory | None:
    """The cached inventory for ``settings``; None when missing, for other settings, or older than
    ``automation.inventory_max_age_hours`` (unless ``any_age``: a run worker takes what its code
    server used)."""
    try:
        doc = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as err:
        _log.warning("table inventory %s unreadable, tables are discovered again: %s", path, err)
        return None
    if doc.get("format") != FORMAT or doc.get("fingerprint") != fingerprint(settings):
        return None
    age_hours = (time.time() - float(doc.get("written_at", 0))) / 3600
    if not any_age and age_hours > settings.automation.inventory_max_age_hours:
        return None
    return Inventory([table_from_dict(d) for d in doc["tables"]], float(doc["written_at"]), "cache")


def write(settings: Settings, path: Path, tables: Iterable[DiscoveredTable]) -> None:
    """Replace the file atomically (a concurrent reader sees the old or the new inventory)."""
    doc = {
        "format": FORMAT,
        "fingerprint": fingerprint(settings),
        "written_at": time.time(),
        "tables": [table_to_dict(t) for t in sorted(tables, key=lambda t: t.ref)],
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".inventory-", suffix=".json")
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(doc, f, separators=(",", ":"))
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def load_inventory(settings: Settings, path: Path | None = None) -> Inventory:
    """The cached inventory if usable, else discovery (whose result is then cached)."""
    path = path if path is not None else inventory_path()
    if path is not None:
        cached = read(settings, path)
        if cached is not None:
            return cached
    found = discover_lake(settings)
    tables = list(found.tables)
    if path is not None and not found.problems:
        try:
            write(settings, path, tables)
        except OSError as err:  # a read-only home must not stop the code location
            _log.warning("table inventory %s not written: %s", path, err)
    return Inventory(tables, time.time(), "discovery", found.problems)


@dataclass(frozen=True)
class InventoryChange:
    added: list[TableRef]
    dropped: list[TableRef]

    def __bool__(self) -> bool:
        return bool(self.added or self.dropped)

    def describe(self) -> str:
        parts = []
        if self.added:
            parts.append(f"{len(self.added)} new table(s): {', '.join(map(str, self.added[:5]))}")
        if self.dropped:
            parts.append(f"{len(self.dropped)} dropped: {', '.join(map(str, self.dropped[:5]))}")
        return "; ".join(parts) + " (reload the code location to see the change in Dagster)"


# What this process last wrote or found up to date, per file: later ticks skip re-reading it.
_UP_TO_DATE: dict[Path, tuple[str, frozenset[TableRef]]] = {}


def refresh(settings: Settings, known: Iterable[TableRef], path: Path | None = None) -> InventoryChange:
    """Compare the catalogs' table names (one listing per namespace, no table loaded) with
    ``known`` (the tables the definitions hold); on a difference, make the cached inventory list
    exactly the current tables (loading only the new ones), so the next load of the code location
    shows them. Dropped tables leave it; tables of other settings are never mixed in."""
    path = path if path is not None else inventory_path()
    known = set(known)
    current: set[TableRef] = set()
    for name in settings.catalogs:
        current |= set(list_table_refs(settings, open_catalog(settings, name), name))
    change = InventoryChange(sorted(current - known), sorted(known - current))
    if not change or path is None:
        return change
    state = (fingerprint(settings), frozenset(current))
    if _UP_TO_DATE.get(path) == state:
        return change
    cached = read(settings, path, any_age=True)
    kept = [t for t in (cached.tables if cached else []) if t.ref in current]
    have = {t.ref for t in kept}
    if have != current:
        catalogs = {name: open_catalog(settings, name) for name in {r.catalog for r in current - have}}
        kept += [t for ref in sorted(current - have) if (t := discover_table(catalogs[ref.catalog], ref))]
        write(settings, path, kept)
    _UP_TO_DATE[path] = state
    return change
