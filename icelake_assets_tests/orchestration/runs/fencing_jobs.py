"""Jobs of the fencing tests, importable by a run worker and by the multiprocess executor's step
processes (reconstructable): each op holds the product's resource, hence the run's lease and fence."""

import os
import time

import pyarrow as pa
from dagster import In, Nothing, OpExecutionContext, RetryPolicy, job, op
from pyiceberg.catalog.sql import SqlCatalog

from icelake_assets.maintenance.spark import fencing
from icelake_assets.orchestration.assets.commit_gate import no_retry_after_terminate, stop_if_fenced
from icelake_assets.orchestration.resources import IcelakeResource

WAREHOUSE_ENV = "ICELAKE_FENCING_TEST_WAREHOUSE"
TABLE = "app.ticks"


def catalog(folder: str) -> SqlCatalog:
    return SqlCatalog("fencing", uri=f"sqlite:///{folder}/catalog.db", warehouse=f"file://{folder}")


def create_table(folder: str):
    os.makedirs(folder, exist_ok=True)
    cat = catalog(folder)
    cat.create_namespace_if_not_exists("app")
    return cat.create_table_if_not_exists(TABLE, schema=pa.schema([("n", pa.int64())]))


@op
def first_step(context: OpExecutionContext, icelake: IcelakeResource) -> None:
    time.sleep(1.5)


@op(ins={"after": In(Nothing)})
def second_step(context: OpExecutionContext, icelake: IcelakeResource) -> None:
    time.sleep(4.0)


@job(resource_defs={"icelake": IcelakeResource()})
def two_steps():
    """Two steps, each its own process under the multiprocess executor (Dagster's default)."""
    second_step(first_step())


@op
def commit_loop(context: OpExecutionContext, icelake: IcelakeResource) -> None:
    """Appends one row every 0.2 s for at most a minute, each behind the fence check, as the product's
    commit paths are."""
    table = catalog(os.environ[WAREHOUSE_ENV]).load_table(TABLE)
    deadline = time.monotonic() + 60
    n = 0
    with fencing.acting():
        while time.monotonic() < deadline:
            try:
                fencing.check("append")
            except fencing.RunFencedError as err:
                stop_if_fenced(context, err)
            table.append(pa.table({"n": [n]}))
            n += 1
            time.sleep(0.2)


@job(resource_defs={"icelake": IcelakeResource()})
def committing():
    commit_loop()


@op(retry_policy=RetryPolicy(max_retries=3, delay=30))
def retried_commit_loop(context: OpExecutionContext, icelake: IcelakeResource) -> None:
    """As the product's rewrite op: a retry policy, work guarded by no_retry_after_terminate, each
    commit inside fencing.committing (where a terminate's interrupt lands most of the time)."""
    table = catalog(os.environ[WAREHOUSE_ENV]).load_table(TABLE)
    deadline = time.monotonic() + 60
    n = 0
    with no_retry_after_terminate(context), fencing.acting():
        stop_if_fenced(context)
        while time.monotonic() < deadline:
            with fencing.committing("append"):
                table.append(pa.table({"n": [n]}))
                time.sleep(0.2)
            n += 1


@job(resource_defs={"icelake": IcelakeResource()})
def retried_committing():
    retried_commit_loop()
