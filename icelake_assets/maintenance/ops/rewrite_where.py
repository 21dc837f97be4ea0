"""The ``where`` of a whole-table data rewrite: the partitions it names, and every partition of the
table that filter also selects (priced by the cost guard, maintenance/ops/rewrite.py)."""

from __future__ import annotations

from pyiceberg.table import Table

from icelake_assets.catalog.connection import TableRef
from icelake_assets.health.stats import TableStats
from icelake_assets.partitions.filters import excluding_clause, where_clause
from icelake_assets.partitions.layout import partition_layout
from icelake_assets.partitions.values import PartitionValues, partition_values


def table_where(
    table: Table, ref: TableRef, stats: TableStats, named: list[str], rewrite_all: bool = False
) -> tuple[str | None, list[str]]:
    """A ``where`` selecting the named partitions of a whole-table rewrite, and every partition of the
    table it selects. None (and every partition) when the partitions cannot be named by a filter: an
    unpartitioned table (one partition), or fields no filter can express. ``rewrite_all`` (drift):
    a named partition of an older spec without the current fields (e.g. files written before the
    table was partitioned) is selected by excluding the current spec's other partitions instead."""
    if set(stats.partitions) <= set(named):
        return None, sorted(stats.partitions)
    layout = partition_layout(table, with_earliest=False)
    wanted: set[PartitionValues] = set()
    unnamed = []
    for label in named:
        ps = stats.partitions[label]
        values = partition_values(layout, label, ps.spec_id, ps.values) if layout.dimensions else ()
        wanted.update(values)
        if not values:
            unnamed.append(label)
    if unnamed:
        others = {
            v
            for label, ps in stats.partitions.items()
            if label not in named and ps.spec_id == layout.spec_id
            for v in partition_values(layout, label, ps.spec_id, ps.values)
        } - wanted
        # Every other partition is of the current spec (a file of an older one is drift, so named).
        alone = all(ps.spec_id == layout.spec_id for c, ps in stats.partitions.items() if c not in named)
        excluding = (
            excluding_clause(layout, ref.catalog, others) if rewrite_all and others and alone else None
        )
        if excluding is None:
            return None, sorted(stats.partitions)
        kept = [
            c
            for c, ps in stats.partitions.items()
            if c in named or not set(partition_values(layout, c, ps.spec_id, ps.values)) <= others
        ]
        return excluding, sorted(kept)
    covered = [
        label
        for label, ps in stats.partitions.items()
        if set(partition_values(layout, label, ps.spec_id, ps.values)) & wanted
    ]
    return where_clause(layout, ref.catalog, wanted), sorted(covered)
