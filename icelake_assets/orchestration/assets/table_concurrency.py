"""Several tables of one op's step maintained at once (``automation.table_concurrency``; at 1, the
default, a step's tables go one after another in the op's own thread, as always: no thread is made).

Each of ``concurrency`` threads takes the run's next table and does its op work; the outcomes come back
in the tables' order, so what the op records and logs of them does not depend on which finished first.
The threads share the run's one Spark session (one driver: its own, or the shared resident's):

* each thread makes the run's session its active one (Spark's active session is per JVM thread);
* each thread's Spark jobs go to a FAIR scheduler pool of its own (``spark.scheduler.mode=FAIR``,
  maintenance/spark/session.py), so a large table's tasks do not starve the small tables beside it.
  A pool per thread, not per table: Spark never drops a pool, and a resident driver that served
  thousands of tables would sort thousands of empty pools at every task offer;
* Spark's local properties are per thread (pinned threads: each Python thread has a JVM thread of its
  own), so a thread that attached to the shared driver puts its jobs in the run's job group itself: the
  resident cancels a dead or fenced run's jobs by that group;
* the session's commit tags (maintenance/spark/commit_tags.py) are session-wide and the same for every
  table of an op: they are cleared once every table is done, not by the first table to end.

What overlaps is the tables of one step: the tables of one table group (pool). A shared run's tables
of different pools are chains of steps of their own, which Dagster's in-process executor runs one step
at a time.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

from dagster import OpExecutionContext

from icelake_assets.maintenance.spark import fencing
from icelake_assets.maintenance.spark.commit_tags import untag_session

POOL_PREFIX = "icelake-table-"
JOIN_POLL_SECONDS = 0.5  # the op's thread returns to Python this often: a terminate's interrupt lands

T = TypeVar("T")
# .pool: the pool of the table thread running here; .tagged: the sessions whose tags end with the op
_thread = threading.local()
_OPENING = threading.Lock()  # the run's Spark session is opened (or attached) once, not per thread


def outcomes(
    tables: Sequence[T],
    work: Callable[[T], Any],
    configured: int,
    on_interrupt: Callable[[BaseException], None],
) -> Iterator[tuple[T, Any]]:
    """Each table with what ``work`` returned or raised (an Exception), in the tables' order: at
    ``configured`` 1, one after another in this thread, each done only when it is asked for (the
    caller may stop at a table's error); above, :func:`each_at_once`."""
    threads = concurrency(configured, len(tables))
    if threads > 1:
        yield from each_at_once(tables, work, threads, on_interrupt)
        return
    for table in tables:
        try:
            done: Any = work(table)
        except Exception as err:
            done = err
        yield table, done


def concurrency(configured: int, tables: int) -> int:
    """How many tables at once: never more than the run has; one when PySpark's threads are not
    pinned to JVM threads (local properties, pools and job groups would then leak between tables)."""
    if os.environ.get("PYSPARK_PIN_THREAD", "true").lower() != "true":
        return 1
    return max(1, min(configured, tables))


def keep_tags(session: Any) -> bool:
    """In a table thread: the session's commit tags stay until every table of the op is done (True);
    elsewhere False (the caller clears them now)."""
    tagged = getattr(_thread, "tagged", None)
    if tagged is None:
        return False
    tagged[id(session)] = session
    return True


def fence_if_terminated(context: OpExecutionContext, err: BaseException) -> None:
    """The op's thread was interrupted while its tables run: a terminate (as commit_gate's
    no_retry_after_terminate tells it) fences the run now, so the tables in flight stop before their
    next commit instead of committing after the run was canceled."""
    run = context.instance.get_run_by_id(context.run_id)
    if fencing.was_canceled() or (run is not None and run.status.value in ("CANCELING", "CANCELED")):
        fencing.fence_interrupted(f"run {context.run_id} was terminated ({type(err).__name__})")


def opening_session() -> threading.Lock:
    """Held while a table thread opens the run's session (a lazy resource: two threads would start
    or attach two)."""
    return _OPENING


def enter_pool(session: Any, job_group: str | None, table: str) -> None:
    """In a table thread, the jobs it submits from now on: its pool, and the run's job group on the
    shared driver (``job_group``); nothing elsewhere (the op's own thread keeps today's settings)."""
    pool = getattr(_thread, "pool", None)
    if pool is None:
        return
    context = session.sparkContext
    # Spark's active session is per JVM thread too, and a new one has none (it falls back to the
    # driver's default session: on the shared driver not the run's). Iceberg sets up the catalogs its
    # rewrite reads through on the active session (IcebergSource): in the wrong one, the rewrite fails
    # with "Catalog 'default_cache_iceberg' ... not defined".
    session._jvm.SparkSession.setActiveSession(session._jsparkSession)  # noqa: SLF001
    context.setLocalProperty("spark.scheduler.pool", pool)
    if job_group is not None:
        context.setJobGroup(job_group, f"icelake_assets run (PID {os.getpid()}): {table}", True)


def each_at_once(
    tables: Sequence[T],
    work: Callable[[T], Any],
    threads: int,
    on_interrupt: Callable[[BaseException], None],
) -> Iterator[tuple[T, Any]]:
    """``work(table)`` for every table, ``threads`` at a time; yields each table with its result or
    the exception it raised, in the tables' order, once all are done. An interrupt of the op's thread
    (a terminate) goes to ``on_interrupt`` (which fences the run), no table starts after it, and the
    tables in flight are waited for before it is raised: no thread of the op outlives it."""
    results: list[Any] = [None] * len(tables)
    todo = iter(range(len(tables)))
    taking = threading.Lock()
    stop = threading.Event()
    tagged: dict[int, Any] = {}

    def worker(slot: int) -> None:
        _thread.pool, _thread.tagged = f"{POOL_PREFIX}{slot}", tagged
        while not stop.is_set():
            with taking:
                i = next(todo, None)
            if i is None:
                return
            try:
                results[i] = work(tables[i])
            except BaseException as err:  # kept for the op's thread, which raises or records it
                results[i] = err

    workers = [
        threading.Thread(target=worker, args=(n,), name=f"{POOL_PREFIX}{n}", daemon=True)
        for n in range(threads)
    ]
    try:
        for w in workers:
            w.start()
        for w in workers:
            while w.is_alive():
                w.join(JOIN_POLL_SECONDS)
    except BaseException as err:
        stop.set()
        try:
            on_interrupt(err)
        finally:
            for w in workers:
                if w.is_alive():
                    w.join()
        raise
    finally:
        for session in tagged.values():  # the op's tags, the same for every table, end with the last
            with contextlib.suppress(Exception):  # a dead JVM has no tags left to clear
                untag_session(session)
    for result in results:
        if isinstance(result, BaseException) and not isinstance(result, Exception):
            raise result  # not a table's failure (SystemExit and the like): the op's
    yield from zip(tables, results, strict=True)
