"""One table's health as an operator asks for it outside Dagster (``icelake health``): its metadata
findings, and its orphan files when the lake's other tables are given (a storage listing)."""

from __future__ import annotations

from collections.abc import Callable

from pyiceberg.catalog import Catalog

from icelake_assets.catalog.connection import load_table
from icelake_assets.health.cache import ManifestCache
from icelake_assets.health.orphans import scan_table_orphans
from icelake_assets.health.overview import TableHealth
from icelake_assets.health.stats import compute_table_stats
from icelake_assets.planning.health import evaluate
from icelake_assets.planning.orphans import orphan_finding
from icelake_assets.policies import policy_for
from icelake_assets.settings import Settings
from icelake_assets.types import KnownTables, TableRef


def table_health(
    settings: Settings,
    catalog: Catalog,
    ref: TableRef,
    cache: ManifestCache | None = None,
    known: Callable[[], KnownTables] | None = None,
) -> TableHealth:
    """``known``: every known table of the lake (their files are never this table's orphans), asked
    for only here; without it the orphan check is not evaluated and the verdict says Unknown for it,
    not Healthy."""
    table = load_table(catalog, ref)
    policy = policy_for(settings, ref, table.properties)
    extra = []
    if known is not None:
        scan = scan_table_orphans(catalog, ref, table, policy.orphans.older_than_hours, known())
        extra.append(
            orphan_finding(
                len(scan.orphans),
                sum(o.size for o in scan.orphans),
                policy,
                [o.path for o in scan.orphans],
                scan.hidden_files,
                scan.skipped,
                scan.refused,
            )
        )
    return evaluate(
        compute_table_stats(table, policy, cache),
        policy,
        extra,
        name=str(ref),
        not_evaluated=() if known is not None else ("orphan_files",),
    )
