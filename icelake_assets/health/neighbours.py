"""Which other tables lie near a table's location: the orphan scan's rules (health/orphans.py) look
only at tables whose location or write paths lie inside that location or contain it.

A sensor tick, or a run of many small tables, scans every table against the same lake. Parsing and
comparing every other table's locations for every table scanned was quadratic: 0.8 s for a lake of
200 tables, 58 s for 2,000 (bench.health.orphan_rules_bench). The lake's locations are parsed and indexed by path
once per listing: the listing carries its index (:class:`IndexedTables`, what the resource and the
command line hand out for a tick's or a command's scans); each scan then finds its candidates by a
range of the sorted paths (those inside its location) and a lookup of each of its ancestors (those
containing it): 0.004 s and 0.040 s. Candidates are matched by path alone, a superset: the scan's
rules compare scheme and authority themselves."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import cached_property

from icelake_assets.health.storage import FileKey, file_key
from icelake_assets.types import KnownTable, KnownTables


def _ancestors(path: str) -> list[str]:
    """``path`` and every path that contains it, as file_key writes them ("" and "/" contain all)."""
    parts = path.split("/")
    return ["", "/", *("/".join(parts[:i]) for i in range(1, len(parts) + 1))]


class Neighbours:
    """The other tables of a listing, indexed by the paths they claim (location and write paths)."""

    def __init__(self, tables: Sequence[KnownTable]) -> None:
        self.tables = tuple(tables)
        claims = sorted(
            (file_key(path).path, i)
            for i, table in enumerate(self.tables)
            for path in (table.location, *table.write_paths.values())
        )
        self._paths = [path for path, _ in claims]
        self._owners = [i for _, i in claims]

    def _claiming(self, path: str, inside: bool) -> Iterator[int]:
        """The tables claiming ``path`` (``inside``: a path that starts with it), from the sorted paths."""
        for at in range(bisect_left(self._paths, path), len(self._paths)):
            claimed = self._paths[at]
            if not (claimed.startswith(path) if inside else claimed == path):
                return
            yield self._owners[at]

    def near(self, location: FileKey) -> list[KnownTable]:
        """The tables with a claimed path inside ``location`` or containing it, in the listing's order."""
        # Whole path components inside it, as FileKey.under compares; then the location and its ancestors.
        found = set(self._claiming(location.path.rstrip("/") + "/", inside=True))
        for ancestor in _ancestors(location.path):
            found.update(self._claiming(ancestor, inside=False))
        return [self.tables[i] for i in sorted(found)]


@dataclass(frozen=True)
class IndexedTables(KnownTables):
    """A listing of the lake (catalog/known_tables.py) that carries the index of its tables' paths,
    built by the first scan that needs it and kept as long as the listing: a sensor tick lists the
    lake once and scans every table against it. ``KnownTables`` lives below health/ (types.py), so
    the index is added by this subclass; the resource (orchestration/resources.py) and the command
    line list the lake as one."""

    @classmethod
    def of(cls, listing: KnownTables) -> IndexedTables:
        """``listing`` with its index (itself when it carries one: its index is built once)."""
        return listing if isinstance(listing, IndexedTables) else cls(listing.tables, listing.unlisted)

    @cached_property
    def neighbours(self) -> Neighbours:
        return Neighbours(self.tables)
