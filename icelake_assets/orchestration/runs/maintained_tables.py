"""Which tables a Dagster run maintains (run model, model.py): its asset selection, else the table
its tags name, else every table of the pools in its plan. The run history (model.py), the global
cap's slots (concurrency.py), the loop's metrics and the run workers' leases all ask this."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from dagster import AssetKey

from icelake_assets.catalog.connection import TableRef
from icelake_assets.orchestration.names import table_asset_key
from icelake_assets.orchestration.runs.pools import pool_name
from icelake_assets.orchestration.runs.run_tags import named_tables


def table_pool(ref: TableRef, pools: int) -> str:
    """The table's concurrency pool among ``pools`` (``automation.maintenance_pools``): every op of its
    maintenance claims it (see model.py's docstring and orchestration/tables/table_groups.py)."""
    return pool_name(ref, pools)


def pools_by_key(refs: Iterable[TableRef], pools: int) -> dict[AssetKey, str]:
    return {table_asset_key(r): table_pool(r, pools) for r in refs}


def pools_of(run, pools_by_key: Mapping[AssetKey, str]) -> set[str]:
    """The pools a run claims (those of its plan; a run created before pools existed: its tables')."""
    found = set(run.run_op_concurrency.all_pools or ()) if run.run_op_concurrency else set()
    # Runs created before pools existed: their asset selection names the tables.
    found.update(pools_by_key[k] for k in (run.asset_selection or ()) if k in pools_by_key)
    return found


def run_tables(
    run,
    pools_by_key: Mapping[AssetKey, str],
    keys_by_pool: Mapping[str, list[AssetKey]],
    key_by_name: Mapping[str, AssetKey] | None = None,
):
    """The tables a run maintains: its asset selection; a maintenance job's run (no asset), the
    table its tag names; a run of a whole job (no selection), every table of the pools in its plan
    (:func:`names_no_table`: some of those may be another job's; model.table_runs asks the run's plan)."""
    if run.asset_selection:
        return [k for k in run.asset_selection if k in pools_by_key]
    if key_by_name and (named := [key_by_name[n] for n in named_tables(run.tags) or () if n in key_by_name]):
        return named
    return [k for p in pools_of(run, pools_by_key) for k in keys_by_pool.get(p, ())]


def names_no_table(run, key_by_name: Mapping[str, AssetKey]) -> bool:
    """The run names no table (no asset selection, no tag :func:`run_tables` resolves): its tables are
    those of its pools, which a table of another job may share (a partitioned table's own job)."""
    return not run.asset_selection and not any(n in key_by_name for n in named_tables(run.tags) or ())


def product_run_tables(
    run, pools_by_key: Mapping[AssetKey, str], names: Mapping[AssetKey, str] | None = None
) -> tuple[str, ...] | None:
    """The names of the product's tables a run maintains; ``()`` for a run of the product that names
    none (health checks, the lake-wide jobs); None for a run that is not the product's (a user's own
    job in an embedded project: its worker holds no lease, see runs/leases.py)."""
    keys_by_pool: dict[str, list[AssetKey]] = {}
    for key, pool in pools_by_key.items():
        keys_by_pool.setdefault(pool, []).append(key)
    key_by_name = {name: key for key, name in (names or {}).items()}
    keys = run_tables(run, pools_by_key, keys_by_pool, key_by_name)
    if keys:
        return tuple(names[k] if names and k in names else ".".join(k.path) for k in keys)
    if run.job_name.startswith("icelake_") or named_tables(run.tags) is not None:
        return ()
    return None
