"""The settings schema: pydantic models of the settings file and of a table's policy.

:class:`Settings` is the whole file (catalogs, table selection, policies, Spark, audit, metrics,
automation); :class:`Policy` and its parts are what one table is maintained by. Policies (``thresholds``,
``policies.defaults|catalogs|namespaces|tables`` and table properties) are modelled here and resolved per
table in :mod:`icelake_assets.policies`. Every model refuses unknown keys and bounds every numeric knob.
Reading the file is :mod:`.loader`'s; what may be printed is :mod:`.redaction`'s.
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Mapping
from typing import Any, Literal, get_args
from zoneinfo import ZoneInfo

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from icelake_assets.dagster_rules import (
    is_valid_cron_string,
    is_valid_owner,
    is_valid_strict_tag_value,
    is_valid_tag_key,
)
from icelake_assets.settings.asset_keys import AssetKeySettings
from icelake_assets.settings.redaction import redact_properties
from icelake_assets.types import IcelakeError

# Namespace the product writes its own tables to (audit log); never maintained as a user table.
INTERNAL_NAMESPACE = "icelake"
MIN_ORPHAN_AGE_HOURS = 24.0  # Iceberg refuses younger orphans: a file may belong to a running commit.

MiB = 1024 * 1024
GiB = 1024 * MiB
TiB = 1024 * GiB
# Upper bounds of the numeric knobs (file and table properties alike): past them a value is a typo or an
# attempt to switch a guard off (a cap of 10^18 bytes, a million retries), never a policy.
MAX_HOURS = 10 * 365 * 24.0
# automation.checks_per_table: every check per table, or the health summary and the orphan check.
ChecksPerTable = Literal["each", "summary"]  # ten years
MAX_COUNT = 1_000_000
MAX_TARGET_FILE_BYTES = 16 * GiB
MAX_REWRITE_BYTES = 1024 * TiB  # 1 PiB: a cap, not a way to switch the guard off
# Maintenance operations in run order; policy.operations.enabled picks among them.
Operation = Literal["expire_snapshots", "remove_orphan_files", "rewrite_data_files", "rewrite_manifests"]
OPERATIONS: tuple[Operation, ...] = get_args(Operation)
# observe: checks only; propose: sensors record what they would do and launch nothing; enforce: runs.
Mode = Literal["observe", "propose", "enforce"]
# A catalog nobody configured a mode for only proposes: a first rollout never writes to a table.
DEFAULT_MODE: Mode = "propose"


class SettingsError(IcelakeError, ValueError):
    """A settings file that cannot be used; the message names the file, the key and the cause."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SmallFilesPolicy(_Strict):
    # Seed 000's diagnostic: a partition with more than 20 files averaging under 128 MB.
    max_files_per_partition: int = Field(20, ge=1, le=MAX_COUNT)
    max_avg_file_bytes: int = Field(128 * MiB, ge=1, le=64 * GiB)
    # Target of rewrites unless the table sets write.target-file-size-bytes.
    target_file_size_bytes: int = Field(128 * MiB, ge=MiB, le=MAX_TARGET_FILE_BYTES)
    # A file under this fraction of the target counts as small (Amoro: 0.75).
    small_file_ratio: float = Field(0.75, gt=0, le=1)
    # Iceberg's min-input-files: fewer files per group are not worth a rewrite.
    min_input_files: int = Field(5, ge=2, le=MAX_COUNT)
    # binpack keeps the order; sort uses sort_order (columns), else the table's own sort order;
    # zorder clusters by zorder_columns (Iceberg: strategy 'sort', sort_order 'zorder(a, b)').
    strategy: Literal["binpack", "sort", "zorder"] = "binpack"
    sort_order: tuple[str, ...] = ()
    zorder_columns: tuple[str, ...] = ()
    # rewrite_data_files options: commit groups as they finish (a failure keeps the finished ones) ...
    partial_progress_enabled: bool = True
    partial_progress_max_commits: int = Field(10, ge=1, le=10_000)
    # ... but only for a rewrite of more groups or bytes than this: a smaller one commits once.
    partial_progress_min_groups: int = Field(10, ge=1, le=MAX_COUNT)
    partial_progress_min_bytes: int = Field(10 * GiB, ge=0, le=MAX_REWRITE_BYTES)
    # ... and rewrite this many groups at once. Over 1 is refused on SQLite catalogs (one writer):
    # racing commits fail and partial progress drops them silently.
    max_concurrent_file_group_rewrites: int = Field(1, ge=1, le=64)

    @model_validator(mode="after")
    def _zorder_needs_columns(self) -> SmallFilesPolicy:
        if self.strategy == "zorder" and not self.zorder_columns:
            raise ValueError("strategy 'zorder' needs zorder_columns (set them next to the strategy)")
        return self


class SnapshotPolicy(_Strict):
    # expire_snapshots acts when the table holds more snapshots than this ...
    max_count: int = Field(100, ge=1, le=MAX_COUNT)
    # ... or when its oldest snapshot is older than this (Iceberg default: 5 days).
    max_age_hours: float = Field(120.0, gt=0, le=MAX_HOURS)
    # Never keep fewer than this many snapshots (history.expire.min-snapshots-to-keep wins).
    min_keep: int = Field(5, ge=1, le=MAX_COUNT)
    # Never expire a snapshot younger than this, even over max_count: readers and writers that
    # started from it (long queries, streaming jobs, time travel) may still need its files.
    min_age_hours: float = Field(24.0, ge=0, le=MAX_HOURS)


class OrphanPolicy(_Strict):
    older_than_hours: float = Field(72.0, le=MAX_HOURS)
    # remove_orphan_files acts when more orphans than this are found.
    max_count: int = Field(0, ge=0, le=100 * MAX_COUNT)

    @field_validator("older_than_hours")
    @classmethod
    def _refuse_young(cls, v: float) -> float:
        if v < MIN_ORPHAN_AGE_HOURS:
            raise ValueError(
                f"must be at least {MIN_ORPHAN_AGE_HOURS:g} hours: younger files may belong to a "
                "commit in progress and deleting them corrupts the table"
            )
        return v


class ManifestPolicy(_Strict):
    # rewrite_manifests acts when the current snapshot has more manifests than this.
    max_count: int = Field(50, ge=1, le=MAX_COUNT)


class DeleteFilesPolicy(_Strict):
    # delete_files warns when delete files exceed this fraction of the data files ...
    max_file_ratio: float = Field(0.2, gt=0, le=100)
    # ... or deleted records this fraction of the data records (Amoro's duplicate ratio: 0.1).
    max_record_ratio: float = Field(0.1, gt=0, le=100)


class LayoutPolicy(_Strict):
    # layout_drift warns when more than this fraction of the data files were written under an older
    # partition spec, or overlap other files of their partition on the first sort column.
    max_drift_ratio: float = Field(0.1, gt=0, le=1)


class ActivityPolicy(_Strict):
    # Writer commits (any operation but maintenance's 'replace') within this window count as recent.
    window_minutes: float = Field(60.0, gt=0, le=30 * 24 * 60)


class GuardsPolicy(_Strict):
    """What automation waits for before it launches a run (read by the sensors)."""

    # No writer commit for this long before maintenance starts (avoids commit conflicts).
    quiet_period_minutes: float = Field(15.0, ge=0, le=30 * 24 * 60)
    # Cost cap: automation launches no rewrite estimated above this many bytes (planning/guards.py).
    max_rewrite_bytes: int = Field(100 * GiB, ge=MiB, le=MAX_REWRITE_BYTES)


class OperationsPolicy(_Strict):
    # Operations that may act; a disabled one skips itself with the reason in the run's metadata.
    enabled: tuple[Operation, ...] = OPERATIONS


class SensorPolicy(_Strict):
    # How often the health sensor evaluates the table (Dagster's minimum_interval_seconds). An unchanged
    # tick costs ~0.02 s for 1,000 tables (BENCHMARKS.md), so 10 s is allowed (Dagster's sensor daemon
    # loops every 5 s).
    interval_seconds: int = Field(300, ge=10, le=24 * 3600)


class SchedulePolicy(_Strict):
    """Cron schedule as an alternative trigger to the sensor (None: sensor only)."""

    cron: str | None = None
    timezone: str = "UTC"

    @field_validator("cron")
    @classmethod
    def _cron(cls, v: str | None) -> str | None:
        if v is not None and not is_valid_cron_string(v):
            raise ValueError(f"{v!r} is not a 5-field cron expression (e.g. '0 3 * * *')")
        return v

    @field_validator("timezone")
    @classmethod
    def _tz(cls, v: str) -> str:
        try:
            ZoneInfo(v)  # cached per key, unlike available_timezones(): cheap on every resolution
        except (KeyError, ValueError, OSError):  # ZoneInfoNotFoundError is a KeyError
            raise ValueError(f"{v!r} is not an IANA time zone (e.g. 'UTC', 'Europe/Paris')") from None
        return v


class PartitionsPolicy(_Strict):
    """Partitioned maintenance: backfills and retries of the rewrite (read when definitions load)."""

    # A backfill launches one run per this many partitions (Dagster BackfillPolicy.multi_run).
    partitions_per_run: int = Field(10, ge=1, le=10_000)
    # The rewrite op retries partitions that failed this often, waiting delay x 2^attempt (+/- jitter).
    max_retries: int = Field(2, ge=0, le=10)
    retry_delay_seconds: float = Field(30.0, ge=0, le=3600)


class ConfigurationPolicy(_Strict):
    """Settings every table must carry; the table_configuration check reports violations."""

    min_format_version: Literal[1, 2, 3] | None = None
    # Compared with write.format.default (Iceberg's default when unset: parquet).
    file_format: Literal["parquet", "orc", "avro"] | None = None
    # Compared with write.distribution-mode; unset on the table is a violation (engines then choose).
    write_distribution_mode: Literal["none", "hash", "range"] | None = None
    # Any other property that must hold exactly this value.
    required_properties: dict[str, str] = {}
    severity: Literal["warn", "error"] = "warn"


class LoopPolicy(_Strict):
    """The closed loop: what a run does when its ops left their findings failing (orchestration/effect.py)."""

    # warn: the run succeeds, its checks stay failed and it carries the tag icelake/outcome=ineffective;
    # fail: the run fails naming the ops and findings.
    on_ineffective: Literal["warn", "fail"] = "warn"
    # The sensor does not relaunch an ineffective plan on an unchanged table (same policy, no writer
    # commit since) before this many hours.
    relaunch_backoff_hours: float = Field(24.0, gt=0, le=24 * 30)
    # Validation also reads the table with DuckDB and pyiceberg (row count and a column checksum).
    cross_engine_check: bool = False
    # Proof of benefit also times a full-scan query on the snapshots before and after, in the run's
    # Spark session (maintenance/scan_probe.py), for tables up to scan_probe_max_bytes.
    scan_probe: bool = False
    scan_probe_max_bytes: int = Field(GiB, ge=1, le=MAX_REWRITE_BYTES)


class LineagePolicy(_Strict):
    """Dagster asset keys ('prefix/name') of the assets that write the table and of those that read it:
    the asset graph shows writer -> table -> reader. Keys this project does not define appear as
    external assets. Property form: icelake.lineage.producers=a/b,c/d."""

    producers: tuple[str, ...] = ()
    consumers: tuple[str, ...] = ()

    @field_validator("producers", "consumers")
    @classmethod
    def _keys(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        for key in v:
            if not all(re.fullmatch(r"[A-Za-z0-9_\-]+", part) for part in key.split("/")):
                raise ValueError(
                    f"asset key {key!r} must be '/'-separated parts of letters, digits, '_' or '-'"
                )
        return v


class Policy(_Strict):
    # Layered per table (see icelake_assets.policies): defaults < catalog < namespace < table < properties.
    mode: Mode = DEFAULT_MODE
    small_files: SmallFilesPolicy = SmallFilesPolicy()
    snapshots: SnapshotPolicy = SnapshotPolicy()
    orphans: OrphanPolicy = OrphanPolicy()
    manifests: ManifestPolicy = ManifestPolicy()
    delete_files: DeleteFilesPolicy = DeleteFilesPolicy()
    layout: LayoutPolicy = LayoutPolicy()
    activity: ActivityPolicy = ActivityPolicy()
    guards: GuardsPolicy = GuardsPolicy()
    operations: OperationsPolicy = OperationsPolicy()
    sensor: SensorPolicy = SensorPolicy()
    schedule: SchedulePolicy = SchedulePolicy()
    configuration: ConfigurationPolicy = ConfigurationPolicy()
    partitions: PartitionsPolicy = PartitionsPolicy()
    loop: LoopPolicy = LoopPolicy()
    lineage: LineagePolicy = LineagePolicy()
    # Dagster asset owners (e-mail or 'team:name') and tags, shown on the table's asset.
    owners: tuple[str, ...] = ()
    tags: dict[str, str] = {}

    @field_validator("owners")
    @classmethod
    def _owners(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        bad = [o for o in v if not is_valid_owner(o)]
        if bad:
            raise ValueError(f"owners {bad} must be e-mail addresses or 'team:<name>'")
        return v

    @field_validator("tags")
    @classmethod
    def _tags(cls, v: dict[str, str]) -> dict[str, str]:
        for key, value in v.items():
            if not is_valid_tag_key(key) or key.startswith("dagster/"):
                raise ValueError(
                    f"tag key {key!r}: letters, digits, '_', '-', '.', one optional 'prefix/', "
                    "at most 63 characters per part, not under 'dagster/'"
                )
            if not is_valid_strict_tag_value(str(value)):
                raise ValueError(
                    f"tag {key!r} value {value!r}: letters, digits, '_', '-', '.', at most 63 characters"
                )
        return v


class PolicyLayers(_Strict):
    """Overrides over ``thresholds``: each entry sets only the keys it names (fnmatch patterns allowed).

    catalogs: keyed by catalog name; namespaces: by ``namespace`` or ``catalog.namespace``;
    tables: by ``namespace.table`` or ``catalog.namespace.table``."""

    defaults: Policy = Policy()
    catalogs: dict[str, Policy] = {}
    namespaces: dict[str, Policy] = {}
    tables: dict[str, Policy] = {}

    @field_validator("namespaces", "tables")
    @classmethod
    def _patterns(cls, v: dict[str, Policy], info) -> dict[str, Policy]:
        for pattern in v:
            if not pattern.strip():
                raise ValueError("an empty pattern matches nothing")
            if info.field_name == "tables" and "." not in pattern:
                raise ValueError(
                    f"table pattern {pattern!r} must be namespace.table or catalog.namespace.table"
                )
        return v


class TableSelection(_Strict):
    # fnmatch patterns over "catalog.namespace.table" or "namespace.table".
    include: tuple[str, ...] = ("*",)
    exclude: tuple[str, ...] = ()


SPARK_SESSION_ENV = "ICELAKE_SPARK_SESSION"
SparkSessionMode = Literal["shared", "per_run"]


def _default_session() -> str:
    value = os.environ.get(SPARK_SESSION_ENV, "").strip() or "shared"
    if value not in get_args(SparkSessionMode):
        raise SettingsError(
            f"${SPARK_SESSION_ENV}={value!r}: must be one of {', '.join(get_args(SparkSessionMode))}"
        )
    return value


class SparkSettings(_Strict):
    master: str = "local[2]"
    # Maven coordinates; when set, the Iceberg runtime is downloaded instead of taken from the wheel.
    packages: tuple[str, ...] = ()
    config: dict[str, str] = {}
    # shared: runs attach to one Spark driver kept alive between runs (maintenance/resident_spark.py),
    # so a run pays no JVM start; per_run: each run starts and ends its own driver JVM.
    # Default: $ICELAKE_SPARK_SESSION, else shared.
    session: SparkSessionMode = Field(default_factory=_default_session)  # type: ignore[arg-type]
    # The shared driver exits after this long with no run attached.
    idle_minutes: float = Field(10.0, gt=0, le=24 * 60)


class AuditSettings(_Strict):
    """The audit trail: an Iceberg table in the lake (see icelake_assets.audit)."""

    enabled: bool = True
    # namespace.table, in the internal namespace that discovery skips (never maintained itself).
    table: str = f"{INTERNAL_NAMESPACE}.audit_log"
    # Catalog that holds the audit table; None: the first configured catalog.
    catalog: str | None = None

    @field_validator("table")
    @classmethod
    def _table(cls, v: str) -> str:
        parts = v.split(".")
        if len(parts) < 2 or not all(re.fullmatch(r"[A-Za-z0-9_\-]+", p) for p in parts):
            raise ValueError("must be namespace.table of letters, digits, '_' or '-'")
        if parts[0] != INTERNAL_NAMESPACE:
            raise ValueError(
                f"must be in the {INTERNAL_NAMESPACE!r} namespace, which discovery skips "
                "(a maintained audit table would audit its own maintenance)"
            )
        return v


class MetricsSettings(_Strict):
    """Prometheus metrics (see icelake_assets.audit.metrics)."""

    # Folder of the .prom file a node exporter's textfile collector reads; relative to the settings file.
    # Its multiprocess/ subfolder holds every process's counts (PROMETHEUS_MULTIPROC_DIR): never wipe it.
    textfile_dir: str = ".lake/metrics"
    # Rewrite <textfile_dir>/icelake.prom after each batch of updates (off: HTTP scrapes only).
    textfile: bool = True
    # Serve /metrics on 127.0.0.1:<port> from the first process that writes metrics and can bind it
    # (normally the code server, from its first sensor tick); unset: no server.
    http_port: int | None = Field(None, ge=1, le=65535)


class AutomationSettings(_Strict):
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
    # The metadata checks of every table (cheap); the orphan check lists storage, so it runs less often.
    checks_cron: str = "*/30 * * * *"
    orphan_checks_cron: str = "0 4 * * *"
    schedules_default_status: Literal["running", "stopped"] = "running"
    # Tables are spread over this many concurrency pools by a stable hash of their name (a pool admits
    # one maintenance run at a time, see orchestration/run_model.py) and share one maintenance graph
    # per pool: definitions stay cheap at 10,000 tables. More pools: fewer tables wait on another's run.
    maintenance_pools: int = Field(64, ge=1, le=4096)
    # Which health checks each table's asset carries: "each" (every metadata check, the health summary,
    # the orphan and configuration checks) or "summary" (the health summary, which lists every check's
    # finding and fails with the worst, and the orphan check): a fifth of the checks, for lakes of
    # thousands of tables, whose code location then loads much faster (BENCHMARKS.md, "Lake scale").
    checks_per_table: ChecksPerTable = "each"
    # A cached table inventory (catalog/inventory.py) older than this is discovered again at load.
    inventory_max_age_hours: float = Field(24.0, gt=0, le=MAX_HOURS)

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


class Settings(_Strict):
    # pyiceberg properties: strings, or mappings of them for its nested properties (`auth`, `ssl`).
    catalogs: dict[str, dict[str, CatalogValue]]
    tables: TableSelection = TableSelection()
    # Defaults of every table (the historical name; policies.defaults overrides it key by key).
    thresholds: Policy = Policy()
    policies: PolicyLayers = PolicyLayers()
    spark: SparkSettings = Field(default_factory=SparkSettings)
    audit: AuditSettings = AuditSettings()
    metrics: MetricsSettings = MetricsSettings()
    automation: AutomationSettings = AutomationSettings()
    asset_keys: AssetKeySettings = AssetKeySettings()
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
        if self.audit.catalog is not None and self.audit.catalog not in self.catalogs:
            raise ValueError(
                f"audit.catalog: unknown catalog {self.audit.catalog!r} "
                f"(configured: {', '.join(sorted(self.catalogs))})"
            )
        return self

    def __repr_args__(self):  # printing settings never shows a secret
        for key, value in super().__repr_args__():
            if key == "catalogs":
                value = {name: redact_properties(props) for name, props in value.items()}
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
