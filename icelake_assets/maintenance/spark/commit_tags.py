"""Snapshot properties naming the run that made a maintenance commit: its Dagster run id, op and
attempt. The op sets them on its run's Spark session (each run has a session of its own, on the
shared driver too); actions.py puts them on every snapshot it commits. A commit of a run that
never recorded it (the run was killed) is then found by its run id (audit/reconcile.py)."""

from __future__ import annotations

from collections.abc import Mapping

from pyspark.sql import SparkSession

from icelake_assets.types import SNAPSHOT_ATTEMPT as ATTEMPT, SNAPSHOT_OP as OP, SNAPSHOT_RUN_ID as RUN_ID

KEYS = (RUN_ID, OP, ATTEMPT)
# Where the session keeps them: a session conf of the product's own (Spark accepts any key).
_CONF_PREFIX = "spark.icelake.snapshot-property."


def tag_session(spark: SparkSession, run_id: str, op: str, attempt: int) -> None:
    """The commits this session makes from now on name ``run_id``, ``op`` and ``attempt``."""
    for key, value in {RUN_ID: run_id, OP: op, ATTEMPT: str(int(attempt))}.items():
        spark.conf.set(_CONF_PREFIX + key, value)


def untag_session(spark: SparkSession) -> None:
    """The session's later commits name no run (an op ends: the session may serve other work, in
    this process or, on a process's own driver, the next run's)."""
    for key in KEYS:
        spark.conf.unset(_CONF_PREFIX + key)


def session_properties(spark: SparkSession) -> dict[str, str]:
    """The properties the session's commits carry (none for a session no op tagged)."""
    out = {}
    for key in KEYS:
        value = spark.conf.get(_CONF_PREFIX + key, None)
        if value:
            out[key] = value
    return out


def run_of(summary: Mapping[str, str] | None) -> str | None:
    """The run id a snapshot's summary names, if a maintenance run made it."""
    return (summary or {}).get(RUN_ID) or None
