"""The settings schema: pydantic models of the settings file.

:class:`Settings` is the whole file (catalogs, table selection, policies, Spark, audit, metrics,
automation); a table's :class:`Policy` and its parts are :mod:`.policy_schema`'s, re-exported here.
Reading the file is :mod:`.loader`'s; what may be printed is :mod:`.redaction`'s.
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, get_args
from urllib.parse import urlsplit

from pydantic import Field, ValidationInfo, field_validator, model_validator

from icelake_assets.dagster_rules import (
    is_valid_cron_string,
)
from icelake_assets.settings.asset_keys import AssetKeySettings
from icelake_assets.settings.policy_schema import (  # noqa: F401 - re-exported
    DEFAULT_MODE as DEFAULT_MODE,
    INTERNAL_NAMESPACE as INTERNAL_NAMESPACE,
    MAX_COUNT as MAX_COUNT,
    MAX_HOURS as MAX_HOURS,
    MAX_REWRITE_BYTES as MAX_REWRITE_BYTES,
    MAX_TARGET_FILE_BYTES as MAX_TARGET_FILE_BYTES,
    MIN_ORPHAN_AGE_HOURS as MIN_ORPHAN_AGE_HOURS,
    OPERATIONS as OPERATIONS,
    ActivityPolicy as ActivityPolicy,
    ChecksPerTable as ChecksPerTable,
    ChecksPerTableSetting as ChecksPerTableSetting,
    ConfigurationPolicy as ConfigurationPolicy,
    DeleteFilesPolicy as DeleteFilesPolicy,
    GiB as GiB,
    GuardsPolicy as GuardsPolicy,
    LayoutPolicy as LayoutPolicy,
    LineagePolicy as LineagePolicy,
    LoopPolicy as LoopPolicy,
    ManifestPolicy as ManifestPolicy,
    MiB as MiB,
    Mode as Mode,
    Operation as Operation,
    OperationsPolicy as OperationsPolicy,
    OrphanPolicy as OrphanPolicy,
    PartitionsPolicy as PartitionsPolicy,
    Policy as Policy,
    PolicyLayers as PolicyLayers,
    SchedulePolicy as SchedulePolicy,
    SensorPolicy as SensorPolicy,
    SettingsError as SettingsError,
    SmallFilesPolicy as SmallFilesPolicy,
    SnapshotPolicy as SnapshotPolicy,
    StatisticsPolicy as StatisticsPolicy,
    StrictModel as StrictModel,
    TiB as TiB,
)
from icelake_assets.settings.redaction import redact_properties
from icelake_assets.settings.scan_reports import (  # noqa: F401 - re-exported
    ScanReportSettings as ScanReportSettings,
    internal_table,
)


class TableSelection(StrictModel):
    # fnmatch patterns over "catalog.namespace.table" or "namespace.table".
    include: tuple[str, ...] = ("*",)
    exclude: tuple[str, ...] = ()


def is_local_master(master: str) -> bool:
    """``local``, ``local[N]``, ``local[*]``, ``local[N,F]``: executors in the driver's JVM."""
    return master == "local" or master.startswith("local[")


def needs_shared_secret(master: str) -> bool:
    """Whether Spark's authentication needs a secret from the settings with this master: every cluster
    master but YARN and Kubernetes, where Spark makes one per application and hands it to its executors
    (Spark Connect, ``sc://``, is refused where Spark is configured: maintenance/spark/session.py)."""
    return not (is_local_master(master) or master == "yarn" or master.startswith(("k8s://", "sc://")))


SPARK_SESSION_ENV = "ICELAKE_SPARK_SESSION"
SparkSessionMode = Literal["shared", "per_run"]


def _default_session() -> str:
    value = os.environ.get(SPARK_SESSION_ENV, "").strip() or "shared"
    if value not in get_args(SparkSessionMode):
        raise SettingsError(
            f"${SPARK_SESSION_ENV}={value!r}: must be one of {', '.join(get_args(SparkSessionMode))}"
        )
    return value


class SparkSettings(StrictModel):
    master: str = "local[2]"
    # Maven coordinates; when set, the Iceberg runtime is downloaded instead of taken from the wheel.
    packages: tuple[str, ...] = ()
    config: dict[str, str] = {}
    # shared: runs attach to one Spark driver kept alive between runs (maintenance/spark/resident_spark.py),
    # so a run pays no JVM start; per_run: each run starts and ends its own driver JVM.
    # Default: $ICELAKE_SPARK_SESSION, else shared.
    session: SparkSessionMode = Field(default_factory=_default_session)  # type: ignore[arg-type]
    # The shared driver exits after this long with no run attached.
    idle_minutes: float = Field(10.0, gt=0, le=24 * 60)
    # With a cluster master, the driver, master and executors authenticate each other (spark.authenticate)
    # with ``auth_secret``, the cluster's own spark.authenticate.secret: a ${VAR} reference (a literal is
    # refused; docs/scaling.md). false: unauthenticated, unsafe (whoever reaches the cluster's ports runs
    # code as the product). YARN and Kubernetes make a secret per application: none is needed there.
    authenticate: bool = True
    auth_secret: str | None = Field(None, repr=False, validate_default=True)

    @field_validator("auth_secret")
    @classmethod
    def _auth_secret(cls, v: str | None, info: ValidationInfo) -> str | None:
        config = info.data.get("config") or {}
        master = config.get("spark.master", info.data.get("master", ""))
        if not info.data.get("authenticate", True):
            if v is not None:
                raise ValueError("set while spark.authenticate is false: remove one of them")
            return v
        if v is not None and len(v) < 16:
            raise ValueError("must be at least 16 characters (a ${VAR} holding a random secret)")
        if v is None and needs_shared_secret(master) and "spark.authenticate.secret" not in config:
            raise ValueError(
                f"required with the cluster master {master!r}: the driver, master and executors "
                "authenticate with a shared secret; write auth_secret: ${ICELAKE_SPARK_SECRET} and start "
                "the cluster with the same secret (docs/scaling.md), or set spark.authenticate: false "
                "(unsafe: whoever reaches the cluster's ports runs code as the product)"
            )
        return v

    @field_validator("config")
    @classmethod
    def _config_authenticate(cls, v: dict[str, str]) -> dict[str, str]:
        if v.get("spark.authenticate", "true").lower() != "true":
            raise ValueError(
                "spark.authenticate: set spark.authenticate: false in the spark section (unsafe), "
                "not in spark.config"
            )
        return v


class AuditSettings(StrictModel):
    """The audit trail: an Iceberg table in the lake (see icelake_assets.audit)."""

    enabled: bool = True
    # namespace.table, in the internal namespace that discovery skips (never maintained itself).
    table: str = f"{INTERNAL_NAMESPACE}.audit_log"
    # Catalog that holds the audit table; None: the first configured catalog.
    catalog: str | None = None

    @field_validator("table")
    @classmethod
    def _table(cls, v: str) -> str:
        return internal_table(v, "a maintained audit table would audit its own maintenance")


class AgentSettings(StrictModel):
    """One agent identity of ``icelake mcp`` (docs/agents.md): read tools always; write tools only with
    ``write: true``, within its cost caps, and held for a person when ``require_human_approval``."""

    write: bool = False
    # Bytes one approve may rewrite (the plan's estimate); None: only the table's own cost guard.
    max_rewrite_bytes_per_call: int | None = Field(None, ge=0, le=MAX_REWRITE_BYTES)
    # Bytes this agent's approved runs may rewrite per UTC day (from its audit records).
    max_rewrite_bytes_per_day: int | None = Field(None, ge=0)
    # An approve is not launched: it is recorded as held, for a person to approve in the UI or shell.
    require_human_approval: bool = False
    # The bearer token of this identity over HTTP: a ${VAR} reference (a literal is refused).
    token: str | None = None

    @field_validator("token")
    @classmethod
    def _token(cls, v: str | None) -> str | None:
        if v is not None and len(v) < 16:
            raise ValueError("must be at least 16 characters (a ${VAR} holding a random token)")
        return v


class MetricsSettings(StrictModel):
    """Prometheus metrics (see icelake_assets.audit.metrics)."""

    # Folder of the .prom file a node exporter's textfile collector reads; relative to the settings file.
    # Its multiprocess/ subfolder holds every process's counts (PROMETHEUS_MULTIPROC_DIR): never wipe it.
    textfile_dir: str = ".lake/metrics"
    # Rewrite <textfile_dir>/icelake.prom after each batch of updates (off: HTTP scrapes only).
    textfile: bool = True
    # Serve /metrics on 127.0.0.1:<port> from the first process that writes metrics and can bind it
    # (normally the code server, from its first sensor tick); unset: no server.
    http_port: int | None = Field(None, ge=1, le=65535)


class AutomationSettings(StrictModel):
    """The sensors and schedules that run the lake without anybody clicking."""

    # Whether the maintenance sensor starts running when the code location loads.
    sensor_default_status: Literal["running", "stopped"] = "running"
    # Part of Dagster's 60 s sensor evaluation limit one tick may spend evaluating tables; the rest
    # of the tables are evaluated on the next ticks (a cursor remembers where the tick stopped).
    tick_budget_seconds: float = Field(40.0, gt=0, le=55)
    # The sensor lists each table's storage for orphans this often (listing is the expensive part).
    orphan_scan_hours: float = Field(24.0, gt=0, le=MAX_HOURS)
    # Under the instance's global run cap, how many maintenance runs the sensor keeps waiting in the
    # run queue beyond the cap (best first), so a freed slot is refilled without waiting for a tick.
    # Unset: as many as the cap. 0: request only the free slots.
    queued_runs_ahead: int | None = Field(None, ge=0, le=1000)
    # The launch order under the run cap (planning/priority.py): each table (or namespace) has an equal
    # share of the maintenance run time of the last ``fair_share_window_hours``; a table over its share
    # launches after those under theirs, unless it has waited past ``max_wait_minutes`` (then the
    # tables past that bound go first, oldest first, whatever their share or benefit).
    fair_share_window_hours: float = Field(24.0, gt=0, le=7 * 24)
    fair_share_by: Literal["table", "namespace"] = "table"
    max_wait_minutes: float = Field(240.0, gt=0, le=30 * 24 * 60)
    # Small tables share a run (policy ``packing``, planning/packing.py): at most this many tables and
    # this many bytes of predicted work per run. 1: every table has a run of its own.
    packed_run_max_tables: int = Field(20, ge=1, le=200)
    packed_run_max_bytes: int = Field(2 * GiB, ge=0, le=1024 * GiB)
    # The metadata checks of every table (cheap); the orphan check lists storage, so it runs less often.
    checks_cron: str = "*/30 * * * *"
    orphan_checks_cron: str = "0 4 * * *"
    schedules_default_status: Literal["running", "stopped"] = "running"
    # Tables are spread over this many concurrency pools by a stable hash of their name (a pool admits
    # one maintenance run at a time, see orchestration/runs/model.py) and share one maintenance graph
    # per pool: definitions stay cheap at 10,000 tables. More pools: fewer tables wait on another's run.
    maintenance_pools: int = Field(64, ge=1, le=4096)
    # Which health checks each table's asset carries: "each" (every metadata check, the health summary,
    # the orphan and configuration checks) or "summary" (the health summary, which lists every check's
    # finding and fails with the worst, and the orphan check): a fifth of the checks, and of the
    # Dagster events a table's report and maintenance write (BENCHMARKS.md, "Lake scale", "A lake of
    # thousands"). "auto": "each" for a lake of up to ``checks_each_max_tables`` tables, "summary" above.
    checks_per_table: ChecksPerTableSetting = "auto"
    checks_each_max_tables: int = Field(100, ge=0, le=MAX_COUNT)
    # A cached table inventory (catalog/inventory.py) older than this is discovered again at load.
    inventory_max_age_hours: float = Field(24.0, gt=0, le=MAX_HOURS)
    # How many tables' metadata locations a sensor reads at once from a catalog that answers one table
    # per request (REST, Hive, Glue; a SQL catalog answers every table in one query): each worker
    # opens its own client of the catalog (catalog/locations.py, docs/scaling.md).
    catalog_concurrency: int = Field(8, ge=1, le=64)
    # How many tables of one run's table group (its tables of one pool: one chain of steps) are
    # maintained at once in its Spark driver (the shared one too), each in a FAIR scheduler pool of
    # its own (orchestration/assets/table_concurrency.py). 1: one after another, as before.
    table_concurrency: int = Field(1, ge=1, le=32)
    # The lake overview's automation sensor (sensors/health.py) evaluates its condition over every
    # table's asset and checks: at 200 tables about a second a tick on an idle instance, several
    # under load. It ticks at the sensors' interval, but never more often than this.
    overview_min_interval_seconds: int = Field(60, ge=10, le=24 * 3600)
    # Health per partition (orchestration/checks/partition_checks.py): a partitioned table's asset also
    # carries small_files, delete_files and layout_drift per partition (``<check>_by_partition``). "auto":
    # on where the installed Dagster takes partitioned asset checks; "off": the table-level checks only.
    partition_checks: Literal["auto", "on", "off"] = "auto"

    def checks_for(self, tables: int) -> ChecksPerTable:
        """The checks each table of a lake of ``tables`` tables carries (``checks_per_table``)."""
        if self.checks_per_table != "auto":
            return self.checks_per_table
        return "each" if tables <= self.checks_each_max_tables else "summary"

    @field_validator("partition_checks", mode="before")
    @classmethod
    def _partition_checks(cls, v: Any) -> Any:
        if isinstance(v, bool):  # YAML reads a bare on / off as true / false
            return "on" if v else "off"
        if v not in ("auto", "on", "off"):
            raise ValueError(f"{v!r} is not one of auto, on, off")
        return v

    @field_validator("checks_cron", "orphan_checks_cron")
    @classmethod
    def _cron(cls, v: str) -> str:
        if not is_valid_cron_string(v):
            raise ValueError(f"{v!r} is not a 5-field cron expression (e.g. '0 3 * * *')")
        return v


# A catalog property's value: text (numbers and booleans are written as pyiceberg reads them), or a
# mapping for pyiceberg's nested properties such as ``auth: {type: oauth2, oauth2: {...}}``.
# (typed Any for pydantic; ``_catalogs_text`` makes every leaf text before validation).
CatalogValue = Any


def _catalog_value(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _catalog_value(v) for k, v in value.items()}
    if isinstance(value, bool):
        return str(value).lower()
    return value if isinstance(value, str) else str(value)


class Settings(StrictModel):
    # pyiceberg properties: strings, or mappings of them for its nested properties (`auth`, `ssl`).
    catalogs: dict[str, dict[str, CatalogValue]]
    tables: TableSelection = TableSelection()
    # Defaults of every table (the historical name; policies.defaults overrides it key by key).
    thresholds: Policy = Policy()
    policies: PolicyLayers = PolicyLayers()
    spark: SparkSettings = Field(default_factory=SparkSettings)
    audit: AuditSettings = AuditSettings()
    scan_reports: ScanReportSettings = ScanReportSettings()
    metrics: MetricsSettings = MetricsSettings()
    automation: AutomationSettings = AutomationSettings()
    asset_keys: AssetKeySettings = AssetKeySettings()
    # Agent identities of `icelake mcp` (read-only unless one allows writing).
    agents: dict[str, AgentSettings] = {}
    source: str = "<embedded default>"

    @field_validator("catalogs", mode="before")
    @classmethod
    def _catalogs_text(cls, v: Any) -> Any:
        if not isinstance(v, Mapping):
            return v
        return {
            name: _catalog_value(props) if isinstance(props, Mapping) else props for name, props in v.items()
        }

    @field_validator("catalogs")
    @classmethod
    def _catalogs(cls, v: dict[str, dict[str, CatalogValue]]) -> dict[str, dict[str, CatalogValue]]:
        if not v:
            raise ValueError("at least one catalog is required")
        for name, props in v.items():
            # '-' too: pyiceberg turns PYICEBERG_CATALOG__MY_CAT__* into catalog 'my-cat'.
            if not name.replace("_", "").replace("-", "").isalnum():
                raise ValueError(f"catalog name {name!r} must be letters, digits, '_' and '-'")
            if "type" not in props and "uri" not in props:
                raise ValueError(
                    f"catalog {name!r} needs a 'type' (sql, rest, glue, hive) or a 'uri' "
                    "(in this file, .pyiceberg.yaml or PYICEBERG_CATALOG__<NAME>__TYPE)"
                )
        return v

    @model_validator(mode="after")
    def _policy_catalogs_exist(self) -> Settings:
        for key in self.policies.catalogs:
            if not any(c in key for c in "*?[") and key not in self.catalogs:
                configured = ", ".join(sorted(self.catalogs))
                raise ValueError(f"policies.catalogs.{key}: unknown catalog (configured: {configured})")
        return self

    @model_validator(mode="after")
    def _audit_catalog_exists(self) -> Settings:
        for key, name in (("audit", self.audit.catalog), ("scan_reports", self.scan_reports.catalog)):
            if name is not None and name not in self.catalogs:
                raise ValueError(
                    f"{key}.catalog: unknown catalog {name!r} (configured: {', '.join(sorted(self.catalogs))})"
                )
        return self

    @model_validator(mode="before")
    @classmethod
    def _scan_reports_dir(cls, data: Any) -> Any:
        """A relative local scan_reports.dir is the settings file's neighbour, as other folders are."""
        section = data.get("scan_reports") if isinstance(data, Mapping) else None
        if not isinstance(section, Mapping):
            return data
        folder = section.get("dir")
        if not isinstance(folder, str) or not folder.strip() or len(urlsplit(folder).scheme) > 1:
            return data
        if Path(folder).expanduser().is_absolute():
            return data
        source = Path(str(data.get("source", "")))
        base = source.parent if source.is_file() else Path.cwd()
        return {**data, "scan_reports": {**section, "dir": str((base / folder).resolve())}}

    def scan_reports_catalog(self) -> str:
        """The catalog of the scan reports table: its own, else the audit's, else the first one."""
        return self.scan_reports.catalog or self.audit.catalog or next(iter(self.catalogs))

    @field_validator("agents")
    @classmethod
    def _agent_names(cls, v: dict[str, AgentSettings]) -> dict[str, AgentSettings]:
        for name in v:
            if not re.fullmatch(r"[A-Za-z0-9_.\-]{1,64}", name):
                raise ValueError(f"agent name {name!r} must be 1-64 letters, digits, '_', '.' or '-'")
        tokens = [a.token for a in v.values() if a.token]
        if len(tokens) != len(set(tokens)):
            raise ValueError("two agents share a token: each identity needs its own")
        return v

    def __repr_args__(self):  # printing settings never shows a secret
        for key, value in super().__repr_args__():
            if key == "catalogs":
                value = {name: redact_properties(props) for name, props in value.items()}
            elif key == "agents":
                value = {n: a.model_copy(update={"token": a.token and "***"}) for n, a in value.items()}
            elif key == "spark":
                value = value.model_copy(update={"config": redact_properties(value.config)})
            yield key, value

    def redacted_catalog_properties(self, name: str) -> dict[str, str]:
        """A catalog's properties safe to print or log."""
        return redact_properties(self.catalog_properties(name))

    def catalog_properties(self, name: str) -> dict[str, str]:
        try:
            return dict(self.catalogs[name])
        except KeyError:
            raise SettingsError(
                f"unknown catalog {name!r} (configured in {self.source}: {', '.join(sorted(self.catalogs))})"
            ) from None

    def selects(self, catalog: str, namespace: str, table: str) -> bool:
        if namespace.split(".")[0] == INTERNAL_NAMESPACE:
            return False
        names = (f"{catalog}.{namespace}.{table}", f"{namespace}.{table}")
        included = any(fnmatch.fnmatchcase(n, p) for p in self.tables.include for n in names)
        excluded = any(fnmatch.fnmatchcase(n, p) for p in self.tables.exclude for n in names)
        return included and not excluded
