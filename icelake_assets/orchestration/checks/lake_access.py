"""Which catalogs and tables the code location could not read, shown where people look: the lake
overview's description (as of the load) and its ``catalogs_reachable`` check (probed again on every
evaluation, so it turns green when the catalog is back, before the definitions reload).

A catalog that is down is an error for its tables only: discovery leaves it out with its cause
(catalog/discovery.py), every other catalog's tables load as usual.
"""

from collections.abc import Sequence

from dagster import (
    AssetCheckExecutionContext,
    AssetCheckResult,
    AssetChecksDefinition,
    AssetCheckSeverity,
    MetadataValue,
    asset_check,
)

from icelake_assets.catalog.connection import load_table
from icelake_assets.catalog.discovery import DiscoveryProblem, list_table_refs
from icelake_assets.orchestration.display import md_cell
from icelake_assets.orchestration.resources import IcelakeResource

CATALOGS_CHECK = "catalogs_reachable"


def problems_markdown(problems: Sequence[DiscoveryProblem]) -> str:
    """The load's problems as a short markdown list (empty when none)."""
    if not problems:
        return ""
    lines = ["", "**Left out when the definitions loaded** (see the `catalogs_reachable` check):"]
    lines += [f"- {md_cell(str(p), 300)}" for p in problems[:20]]
    if len(problems) > 20:
        lines.append(f"- … and {len(problems) - 20} more")
    return "\n".join(lines)


def probe(icelake: IcelakeResource, at_load: Sequence[DiscoveryProblem]) -> list[DiscoveryProblem]:
    """The catalogs that cannot be listed now, and the tables unreadable at load that still are."""
    found: list[DiscoveryProblem] = []
    settings = icelake.settings
    for name in settings.catalogs:
        try:
            list_table_refs(settings, icelake.catalog(name), name)
        except Exception as err:
            found.append(DiscoveryProblem.from_error(name, err))
    down = {p.catalog for p in found}
    for problem in at_load:
        if problem.table is None or problem.catalog in down:
            continue
        try:
            load_table(icelake.catalog(problem.catalog), problem.table)
        except Exception as err:
            found.append(DiscoveryProblem.from_error(problem.catalog, err, problem.table))
    return found


def build_catalogs_check(overview_key, at_load: Sequence[DiscoveryProblem]) -> AssetChecksDefinition:
    """ERROR while a configured catalog cannot be listed or a table's metadata cannot be read."""

    @asset_check(
        asset=overview_key,
        name=CATALOGS_CHECK,
        description="Every configured catalog can be listed and every discovered table read; names the "
        "catalog or table at fault and why (the others are checked and maintained regardless).",
        blocking=False,
    )
    def catalogs_reachable(context: AssetCheckExecutionContext, icelake: IcelakeResource) -> AssetCheckResult:
        problems = probe(icelake, at_load)
        for p in problems:
            context.log.warning(str(p))
        down = [p for p in problems if p.table is None]
        unreadable = [p for p in problems if p.table is not None]
        if not problems:
            description = f"all {len(icelake.settings.catalogs)} catalogs reachable, every table readable"
        else:
            description = "; ".join(str(p) for p in problems[:5]) + (" …" if len(problems) > 5 else "")
        return AssetCheckResult(
            passed=not problems,
            severity=AssetCheckSeverity.ERROR,
            description=description,
            metadata={
                "catalogs/down": MetadataValue.int(len(down)),
                "tables/unreadable": MetadataValue.int(len(unreadable)),
                "problems": MetadataValue.json([{"what": str(p), "catalog": p.catalog} for p in problems]),
            },
        )

    return catalogs_reachable
