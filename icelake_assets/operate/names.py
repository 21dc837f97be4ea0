"""Table names as people copy them: Iceberg's ``catalog.ns.table`` (``ns.table`` in the first catalog)
or the Dagster UI's asset key ``catalog/ns/table``. Light: the command line's ``--help`` imports it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from icelake_assets.types import TableRef

if TYPE_CHECKING:
    from icelake_assets.settings import Settings


def parse_table(text: str, settings: Settings) -> TableRef:
    """A table named as Iceberg does (``catalog.ns.table``, ``ns.table`` in the first catalog) or as the
    Dagster UI shows its asset key (``catalog/ns/table``)."""
    if "/" in text:
        parts = [p for p in text.strip("/").split("/")]
        if len(parts) < 3 or not all(parts):
            raise ValueError(f"invalid table name {text!r}: expected catalog/namespace/table")
        return TableRef.parse(".".join(parts))
    return TableRef.parse(text, default_catalog=next(iter(settings.catalogs)))
