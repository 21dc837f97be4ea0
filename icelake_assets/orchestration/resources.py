"""Resources: the lake (settings, catalogs, metadata statistics) and Spark (Iceberg-enabled)."""

from __future__ import annotations

import contextlib
import logging
import signal
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from functools import partial
from typing import Any

from cachetools import LRUCache
from dagster import ConfigurableResource, DagsterInstance, DagsterRun, InitResourceContext
from dagster_pyspark import LazyPySparkResource
from dagster_pyspark.resources import spark_session_from_config
from pydantic import PrivateAttr
from pyiceberg.catalog import Catalog
from pyiceberg.table import Table
from pyspark.sql import SparkSession

from icelake_assets import private_api
from icelake_assets.audit.orphan_candidates import OrphanCandidates
from icelake_assets.catalog.connection import (
    CatalogUnavailableError,
    TableRef,
    load_table,
    open_catalog,
    table_ref,
)
from icelake_assets.catalog.known_tables import known_tables
from icelake_assets.catalog.locations import TableLoader
from icelake_assets.health.cache import default_cache_path
from icelake_assets.health.neighbours import IndexedTables
from icelake_assets.health.orphan_phases import OrphanPhases, phases_of
from icelake_assets.health.orphans import KnownTables, OrphanScan, scan_table_orphans
from icelake_assets.health.stats import ManifestCache, TableStats, compute_table_stats
from icelake_assets.maintenance.spark import fencing
from icelake_assets.maintenance.spark.preflight import preflight
from icelake_assets.maintenance.spark.resident_spark import Attachment, attach, spark_runs_here
from icelake_assets.maintenance.spark.session import SparkSetupError, secret_spark_config
from icelake_assets.orchestration.runs.leases import RunLease
from icelake_assets.planning.stale_runs import max_runtime_seconds
from icelake_assets.policies import EffectivePolicy, resolve_policy
from icelake_assets.settings import Policy, Settings, load_settings, redact_value

# Resource keys, namespaced to the product: a user's project may have its own ``pyspark`` resource
# and its own ``io_manager`` (orchestration/project.py adds the product to such a project).
ICELAKE_RESOURCE = "icelake"
SPARK_RESOURCE = "icelake_spark"
# The maintenance ops pass their run state through this one, never through the user's io_manager.
RUN_STATE_IO_MANAGER = "icelake_run_state_io_manager"

# Manifests are immutable: one cache per process serves checks, sensors and ops alike.
# The disk level ($ICELAKE_HEALTH_CACHE, default ~/.cache/icelake_assets/health.sqlite) carries it
# across processes: Dagster runs every check and sensor evaluation in a process of its own.
_MANIFEST_CACHE: ManifestCache | None = None
_LOCK = threading.Lock()


def manifest_cache() -> ManifestCache:
    global _MANIFEST_CACHE
    if _MANIFEST_CACHE is None:
        _MANIFEST_CACHE = ManifestCache(path=default_cache_path())
    return _MANIFEST_CACHE


def _ensure_max_runtime(instance: DagsterInstance, run: DagsterRun) -> None:
    """Every run of the product carries ``dagster/max_runtime``: runs of the implicit asset job (the
    UI's Materialize, backfills) get the backstop the product's own jobs are launched with. Run
    monitoring reads the run's tags on every pass, so a tag added now counts."""
    tag = private_api.MAX_RUNTIME_SECONDS_TAG
    if tag in run.tags:
        return
    with contextlib.suppress(Exception):  # the storage is down: the lease's watch still guards
        instance.add_run_tags(run.run_id, {tag: str(max_runtime_seconds(0))})


class IcelakeResource(ConfigurableResource):
    """Settings, catalogs and health statistics of the lake.

    ``config_path`` names the settings file; empty means ``$ICELAKE_CONFIG`` or ``./icelake.yaml``."""

    config_path: str | None = None
    _settings: Settings | None = PrivateAttr(default=None)
    _catalogs: dict = PrivateAttr(default_factory=dict)
    _lease: RunLease | None = PrivateAttr(default=None)
    _prefetched: dict[TableRef, Table] = PrivateAttr(default_factory=dict)  # prefetch_tables
    _loaders: dict[str, TableLoader] = PrivateAttr(default_factory=dict)
    # Each table's policy, resolved once per run (a run's ops each ask): by table and properties, so a
    # property a writer changes meanwhile is resolved again.
    _policies: LRUCache[tuple[str, tuple[tuple[str, str], ...]], EffectivePolicy] = PrivateAttr(
        default_factory=lambda: LRUCache(maxsize=4096)
    )

    def setup_for_execution(self, context: InitResourceContext) -> None:
        # Every run of the product uses this resource: its worker holds the run's lease while it lives
        # (runs/leases.py), so a run whose worker died is failed by the sensor whatever killed it. The
        # lease ends with the run (no teardown here: it would make every context of this resource a
        # context manager, sensors' included).
        # The same thread watches the run: judged dead, or terminated from the UI or by max_runtime,
        # it is fenced before its next commit (maintenance/spark/fencing.py).
        run = context.run
        # A finished run's resources (a result read after the run) have no run to hold.
        if run is not None and context.instance is not None and not run.is_finished:
            fencing.arm(run.run_id)
            self._lease = RunLease(
                context.instance,
                run.run_id,
                on_fenced=partial(fencing.fence, run.run_id),
                on_renewed=fencing.lease_renewed,
            ).start()
            _ensure_max_runtime(context.instance, run)

    @property
    def settings(self) -> Settings:
        if self._settings is None:
            self._settings = load_settings(self.config_path)
        return self._settings

    def catalog(self, name: str) -> Catalog:
        if name not in self._catalogs:
            self._catalogs[name] = open_catalog(self.settings, name)
        return self._catalogs[name]

    def load_table(self, ref: TableRef) -> Table:
        prefetched = self._prefetched.pop(ref, None)  # read once: a later load reads the catalog again
        return prefetched if prefetched is not None else load_table(self.catalog(ref.catalog), ref)

    def prefetch_tables(self, refs: Sequence[TableRef]) -> None:
        """Load these tables at once (``automation.catalog_concurrency`` at a time per catalog): the
        next load_table of each answers with what was read. A table that does not load is left to
        load_table, which reports why; drop_prefetched forgets what was not asked for."""
        by_catalog: dict[str, list[TableRef]] = {}
        for ref in refs:
            if ref not in self._prefetched:
                by_catalog.setdefault(ref.catalog, []).append(ref)
        concurrency = self.settings.automation.catalog_concurrency
        for name, group in by_catalog.items():
            loader = self._loaders.get(name)
            if loader is None:
                try:
                    loader = self._loaders[name] = TableLoader(self.catalog(name), concurrency)
                except CatalogUnavailableError:
                    continue  # each table's load_table reports it
            if loader.parallel:  # else loading ahead would gain nothing (a SQL catalog is local)
                self._prefetched.update(loader.load(group))

    def drop_prefetched(self) -> None:
        """Forget the tables loaded ahead and not asked for; close the loaders' threads and clients."""
        self._prefetched.clear()
        loaders, self._loaders = list(self._loaders.values()), {}
        for loader in loaders:
            loader.close()

    def effective_policy(self, table: Table) -> EffectivePolicy:
        """The table's policy with its mode and the source of every value, resolved once per table
        and properties for as long as this resource lives (a run, a sensor tick)."""
        ref = table_ref(table)
        key = (str(ref), tuple(sorted(table.properties.items())))
        found = self._policies.get(key)
        if found is None:
            # The table's catalog and identifier pick its catalog/namespace/table layers.
            found = self._policies[key] = resolve_policy(self.settings, ref, table.properties)
        return found

    def policy(self, table: Table) -> Policy:
        return self.effective_policy(table).policy

    def known_tables(self) -> IndexedTables:
        """Every table of every configured catalog, and those that cannot be read (with the cause); the
        listing carries the index of its locations that orphan scans against it share."""
        return IndexedTables.of(known_tables(self.settings, self.catalog))

    def scan_orphans(
        self, ref: TableRef, table: Table, policy: Policy, known: KnownTables | None = None
    ) -> OrphanScan:
        """The table's orphans, leaving other tables' files alone; ``known``: from :meth:`known_tables`
        (the table is not cleaned while a table that may overlap it cannot be read)."""
        others = self.known_tables() if known is None else known
        return scan_table_orphans(
            self.catalog(ref.catalog), ref, table, policy.orphans.older_than_hours, others
        )

    def orphan_candidates(self) -> OrphanCandidates:
        """The store of orphan candidates (audit/orphan_candidates.py), in the audit's catalog."""
        name = self.settings.audit.catalog or next(iter(self.settings.catalogs))
        return OrphanCandidates(self.catalog(name))

    def orphan_phases(
        self, ref: TableRef, scan: OrphanScan, policy: Policy, now: float | None = None
    ) -> OrphanPhases | None:
        """The scan's orphans split by the recorded candidates (None: no recovery window, one pass)."""
        window = policy.orphans.recovery_window_hours
        store = self.orphan_candidates() if window > 0 else None
        return phases_of(scan, store, str(ref), window, time.time() if now is None else now)

    def stats(self, table: Table, policy: Policy | None = None) -> TableStats:
        with _LOCK:
            return compute_table_stats(table, policy or self.policy(table), manifest_cache())


class IcebergSparkResource(LazyPySparkResource):
    """dagster-pyspark's lazy session (no JVM until an op needs it) plus a guard: ``getOrCreate``
    reuses a live session and silently ignores new config, so catalogs missing from a live session
    are registered at runtime and a conflicting one is an error instead of a surprise."""

    # Settings file whose catalog credentials are added at runtime (they stay out of resource config).
    config_path: str | None = None
    # settings spark.session: "shared" attaches to the resident driver (maintenance/spark/resident_spark.py)
    # unless this process already runs Spark; "per_run" starts a driver in this process.
    session: str = "per_run"
    idle_seconds: float = 600.0
    _checked: bool = PrivateAttr(default=False)
    _preflighted: set = PrivateAttr(default_factory=set)
    _attachment: Attachment | None = PrivateAttr(default=None)
    _log: Any = PrivateAttr(default=None)

    def setup_for_execution(self, context: InitResourceContext) -> None:
        self._log = context.log

    @property
    def attachment(self) -> Attachment | None:
        """How this run reached the shared driver (None: a driver of its own)."""
        return self._attachment

    def session_for(self, ref: TableRef, table: Table) -> SparkSession:
        """The session, once this run's pre-flight passed for ``ref`` (maintenance/spark/preflight.py):
        the first op about to use Spark on a table checks that Spark can finish, before any commit."""
        session = self.spark_session
        if str(ref) not in self._preflighted:
            preflight(session, ref, table).raise_if_refused()
            self._preflighted.add(str(ref))
        return session

    def _secrets(self) -> dict[str, str]:
        return secret_spark_config(load_settings(self.config_path)) if self.config_path else {}

    def _init_session(self) -> None:
        # The session is built with the secrets the resource config leaves out (read from the settings'
        # environment now), so they reach Spark without ever being stored in run config.
        if self._spark_session is None:
            conf = {**self.spark_config, **self._secrets()}
            with quiet_py4j(), _keep_sigint():
                if self.session == "shared" and not spark_runs_here():
                    self._spark_session, self._attachment = attach(conf, self.idle_seconds)
                    if self._log is not None:
                        self._log.info(f"Spark: {self._attachment.describe()}")
                else:
                    self._spark_session = spark_session_from_config(conf)

    @property
    def spark_session(self) -> SparkSession:
        session: SparkSession = super().spark_session
        if self._checked:
            return session
        with quiet_py4j():
            for key, value in {**self.spark_config, **self._secrets()}.items():
                if not key.startswith("spark.sql.catalog."):
                    continue
                current = session.conf.get(key, None)
                if current is None:
                    session.conf.set(key, str(value))
                elif current != str(value):
                    raise SparkSetupError(
                        f"a live Spark session has {key}={redact_value(key, current)!r}, not "
                        f"{redact_value(key, str(value))!r}: stop it or use another catalog name"
                    )
        self._checked = True
        return session


@contextmanager
def _keep_sigint() -> Iterator[None]:
    """PySpark's SparkContext replaces the SIGINT handler with one that cancels *every* job of the
    context: on the shared driver, a terminate of one run would cancel all runs' jobs, and Dagster's
    own handler (which ends the run CANCELED) would be gone. Dagster's handler is put back; the run's
    own Spark work is stopped by its fence (maintenance/spark/fencing.py)."""
    main = threading.current_thread() is threading.main_thread()
    handler = signal.getsignal(signal.SIGINT) if main else None
    try:
        yield
    finally:
        if main and handler is not None:
            signal.signal(signal.SIGINT, handler)


@contextmanager
def quiet_py4j() -> Iterator[None]:
    """py4j traces every command and answer at DEBUG, values included: while secrets cross to the JVM,
    its loggers say nothing below INFO (whatever the process's logging configuration)."""
    loggers = [logging.getLogger(name) for name in ("py4j", "py4j.clientserver", "py4j.java_gateway")]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(max(lg.getEffectiveLevel(), logging.INFO))
    try:
        yield
    finally:
        for lg, level in zip(loggers, levels, strict=False):
            lg.setLevel(level)
