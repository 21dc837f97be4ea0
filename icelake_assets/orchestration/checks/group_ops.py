"""One asset-check op for the checks of many tables (a table group): the checks stay per table in
Dagster (each its own key, history and status); the op evaluates the ones a run selects, table by
table. A table whose evaluation fails (missing, catalog down) does not stop the others: the op
raises after the rest, naming it (alone in the run, it raises at once, as a single check would)."""

from collections.abc import Callable, Iterable, Iterator, Sequence

from dagster import (
    AssetCheckEvaluation,
    AssetCheckExecutionContext,
    AssetCheckResult,
    AssetChecksDefinition,
    AssetCheckSpec,
    AssetKey,
    Failure,
)

from icelake_assets.catalog.discovery import DiscoveredTable
from icelake_assets.orchestration.names import named_checks, table_asset_key
from icelake_assets.orchestration.resources import IcelakeResource

# (context, icelake, table, names of its selected checks) -> the table's results (evaluations naming
# their partition, for partitioned checks: partition_checks.py)
Evaluate = Callable[
    [AssetCheckExecutionContext, IcelakeResource, DiscoveredTable, set[str]],
    Iterable[AssetCheckResult | AssetCheckEvaluation],
]


def group_checks(
    name: str,
    tables: Sequence[DiscoveredTable],
    specs: Callable[[DiscoveredTable], Sequence[AssetCheckSpec]],
    evaluate: Evaluate,
    description: str,
) -> AssetChecksDefinition:
    by_key = {table_asset_key(t.ref): t for t in tables}

    @named_checks(
        name=name,
        specs=[s for t in tables for s in specs(t)],
        can_subset=True,
        description=description,
    )
    def checks(
        context: AssetCheckExecutionContext, icelake: IcelakeResource
    ) -> Iterator[AssetCheckResult | AssetCheckEvaluation]:
        selected: dict[AssetKey, set[str]] = {}
        for key in context.selected_asset_check_keys:
            if key.asset_key in by_key:
                selected.setdefault(key.asset_key, set()).add(key.name)
        failed: list[str] = []
        for asset_key, names in sorted(selected.items(), key=lambda kv: by_key[kv[0]].ref):
            table = by_key[asset_key]
            try:
                yield from evaluate(context, icelake, table, names)
            except Exception as err:
                if len(selected) == 1:
                    raise
                context.log.error(f"{table.ref}: checks not evaluated: {err}")
                failed.append(f"{table.ref}: {err}")
        if failed:
            raise Failure(
                description=f"{len(failed)} of {len(selected)} tables' checks not evaluated: "
                + " | ".join(failed)
            )

    return checks
