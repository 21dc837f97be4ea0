"""The tables a tick will read, loaded a chunk at a time ahead of the tick's loop: a catalog that
answers one table per request (REST) is asked ``automation.catalog_concurrency`` tables at once
instead of one after the other. Only tables whose metadata changed since the cursor's last look are
loaded ahead (each of them is read this tick); a table read for another reason (its orphan scan is
due, a run to recheck) loads when its turn comes, as before. The tick ends with
``IcelakeResource.drop_prefetched`` (sensors/maintenance.py): what its budget left unread is
forgotten, the next tick reads it fresh."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from icelake_assets.catalog.connection import TableRef
from icelake_assets.catalog.locations import metadata_file
from icelake_assets.orchestration.resources import IcelakeResource
from icelake_assets.planning.history import Seen


class Prefetch:
    """``ordered``: the tick's tables in the order its loop visits them."""

    def __init__(
        self,
        icelake: IcelakeResource,
        ordered: Sequence[TableRef],
        locations: Mapping[TableRef, str | None],
        seen: Mapping[str, Seen],
    ) -> None:
        self.icelake = icelake
        self.chunk = 2 * icelake.settings.automation.catalog_concurrency
        self.changed = [ref for ref in ordered if _changed(ref, locations.get(ref), seen.get(str(ref)))]
        self.position = {ref: i for i, ref in enumerate(self.changed)}
        self.fetched_until = 0  # changed[:fetched_until] were loaded ahead

    def before_reading(self, ref: TableRef) -> None:
        """The loop is about to read ``ref``: when it is a changed table not loaded yet, load it and the
        next changed tables, a chunk of them at once."""
        at = self.position.get(ref)
        if at is None or at < self.fetched_until or self.chunk <= 2:
            return  # concurrency 1: nothing to gain from loading ahead
        self.fetched_until = at + self.chunk
        self.icelake.prefetch_tables(self.changed[at : self.fetched_until])


def _changed(ref: TableRef, location: str | None, seen: Seen | None) -> bool:
    return location is not None and (seen is None or seen.metadata_file != metadata_file(location))
