"""A table's policy as pydantic models: thresholds of each health check and op, guards, loop,
partitions, lineage and configuration rules, and the layers a settings file sets them in
(``thresholds``, ``policies.defaults|catalogs|namespaces|tables``). Resolved per table in
:mod:`icelake_assets.policies`. Every model refuses unknown keys and bounds every numeric knob."""

from __future__ import annotations

import re
from typing import Literal, get_args
from zoneinfo import ZoneInfo

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from icelake_assets.dagster_rules import (
    is_valid_cron_string,
    is_valid_owner,
    is_valid_strict_tag_value,
    is_valid_tag_key,
)
from icelake_assets.settings.lifecycle_policy import RestorePointPolicy, RetentionPolicy
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
# The checks each table carries: every check, or the health summary and the orphan check.
ChecksPerTable = Literal["each", "summary"]
# automation.checks_per_table: one of those, or "auto" (by the lake's size).
ChecksPerTableSetting = Literal["auto", "each", "summary"]
MAX_COUNT = 1_000_000
MAX_TARGET_FILE_BYTES = 16 * GiB
MAX_REWRITE_BYTES = 1024 * TiB  # 1 PiB: a cap, not a way to switch the guard off
# Maintenance operations in run order; policy.operations.enabled picks among them.
Operation = Literal[
    "manage_restore_points",
    "expire_data",
    "expire_snapshots",
    "remove_orphan_files",
    "rewrite_data_files",
    "rewrite_manifests",
    "compute_statistics",
]
OPERATIONS: tuple[Operation, ...] = get_args(Operation)
# observe: checks only; propose: sensors record what they would do and launch nothing; enforce: runs.
Mode = Literal["observe", "propose", "enforce"]
# A catalog nobody configured a mode for only proposes: a first rollout never writes to a table.
DEFAULT_MODE: Mode = "propose"


class SettingsError(IcelakeError, ValueError):
    """A settings file that cannot be used; the message names the file, the key and the cause."""


class StrictModel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SmallFilesPolicy(StrictModel):
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


class SnapshotPolicy(StrictModel):
    # expire_snapshots acts when the table holds more snapshots than this ...
    max_count: int = Field(100, ge=1, le=MAX_COUNT)
    # ... or when its oldest snapshot is older than this (Iceberg default: 5 days).
    max_age_hours: float = Field(120.0, gt=0, le=MAX_HOURS)
    # Never keep fewer than this many snapshots (history.expire.min-snapshots-to-keep wins).
    min_keep: int = Field(5, ge=1, le=MAX_COUNT)
    # Never expire a snapshot younger than this, even over max_count: readers and writers that
    # started from it (long queries, streaming jobs, time travel) may still need its files.
    min_age_hours: float = Field(24.0, ge=0, le=MAX_HOURS)


class OrphanPolicy(StrictModel):
    older_than_hours: float = Field(72.0, le=MAX_HOURS)
    # remove_orphan_files acts when more orphans than this are found.
    max_count: int = Field(0, ge=0, le=100 * MAX_COUNT)
    # Deletion in two phases (issue 40): a run records the orphans it finds as candidates; a later run
    # deletes those recorded at least this long ago that are still unreferenced and unchanged.
    recovery_window_hours: float = Field(24.0, ge=0, le=MAX_HOURS)

    @field_validator("older_than_hours")
    @classmethod
    def _refuse_young(cls, v: float) -> float:
        if v < MIN_ORPHAN_AGE_HOURS:
            raise ValueError(
                f"must be at least {MIN_ORPHAN_AGE_HOURS:g} hours: younger files may belong to a "
                "commit in progress and deleting them corrupts the table"
            )
        return v


class ManifestPolicy(StrictModel):
    # rewrite_manifests acts when the current snapshot has more manifests than this.
    max_count: int = Field(50, ge=1, le=MAX_COUNT)


class DeleteFilesPolicy(StrictModel):
    # delete_files warns when delete files exceed this fraction of the data files ...
    max_file_ratio: float = Field(0.2, gt=0, le=100)
    # ... or deleted records this fraction of the data records (Amoro's duplicate ratio: 0.1).
    max_record_ratio: float = Field(0.1, gt=0, le=100)


class LayoutPolicy(StrictModel):
    # layout_drift warns when more than this fraction of the data files were written under an older
    # partition spec, or overlap other files of their partition on the first sort column.
    max_drift_ratio: float = Field(0.1, gt=0, le=1)
    # Layout from queries (issue 52, layout/): scan reports this many days old at most are mined ...
    reports_days: int = Field(30, ge=1, le=3650)
    # ... a table's layout is changed at most once per this many days ...
    min_days_between_changes: float = Field(7.0, ge=0, le=3650)
    # ... and only when the best candidate skips at least this much more of the files the recorded
    # filters read (weighted share of files, e.g. 0.3: 30 points more of the files skipped) ...
    min_predicted_gain: float = Field(0.3, gt=0, le=1)
    # ... predicted on a sample of at most this many rows laid out as each candidate would write it.
    sample_rows: int = Field(200_000, ge=1_000, le=10_000_000)
    # In enforce mode, apply a chosen layout without approval (else it waits for `icelake approve`).
    auto: bool = False


class StatisticsPolicy(StrictModel):
    """Column statistics for cost-based optimizers (Puffin NDV sketches, compute_table_stats)."""

    # Which columns get an NDV sketch: every top-level primitive column, the sort order's and
    # partition spec's source columns ("keys"; every column when the table has neither), or a list.
    columns: Literal["all", "keys"] | tuple[str, ...] = "all"
    # statistics fails when the table's latest statistics were computed on a snapshot whose row count
    # differs from the current one's by more than this fraction (or there are none) ...
    max_stale_ratio: float = Field(0.1, gt=0, le=100)
    # ... for a table of at least this many rows (a smaller scan is cheap and broadcast anyway).
    min_rows: int = Field(10_000, ge=0, le=1_000_000_000_000)
    # compute_statistics also runs compute_partition_stats on a partitioned table.
    partition_stats: bool = True

    @field_validator("columns")
    @classmethod
    def _columns(cls, v: str | tuple[str, ...]) -> str | tuple[str, ...]:
        if isinstance(v, tuple) and (not v or not all(c.strip() for c in v)):
            raise ValueError(
                "a list of columns must name at least one column, none empty ('all' or 'keys' else)"
            )
        return v


class ActivityPolicy(StrictModel):
    # Writer commits (any operation but maintenance's 'replace') within this window count as recent.
    window_minutes: float = Field(60.0, gt=0, le=30 * 24 * 60)


class GuardsPolicy(StrictModel):
    """What automation waits for before it launches a run (read by the sensors)."""

    # No writer commit for this long before maintenance starts (avoids commit conflicts).
    quiet_period_minutes: float = Field(15.0, ge=0, le=30 * 24 * 60)
    # Cost cap: automation launches no rewrite estimated above this many bytes (planning/guards.py).
    max_rewrite_bytes: int = Field(100 * GiB, ge=MiB, le=MAX_REWRITE_BYTES)


class OperationsPolicy(StrictModel):
    # Operations that may act; a disabled one skips itself with the reason in the run's metadata.
    enabled: tuple[Operation, ...] = OPERATIONS


class SensorPolicy(StrictModel):
    # How often the health sensor evaluates the table (Dagster's minimum_interval_seconds). An unchanged
    # tick costs ~0.02 s for 1,000 tables (BENCHMARKS.md), so 10 s is allowed (Dagster's sensor daemon
    # loops every 5 s).
    interval_seconds: int = Field(300, ge=10, le=24 * 3600)


class PackingPolicy(StrictModel):
    """Small tables share a run (planning/packing.py): one queue turn, process and Spark attach for
    several tables. A table whose predicted work is within both thresholds is packed with others."""

    enabled: bool = True
    # Bytes the run would read and write again (the cost guard's estimate) ...
    max_bytes: int = Field(256 * MiB, ge=0, le=MAX_REWRITE_BYTES)
    # ... and data plus delete files every op plans over.
    max_files: int = Field(2_000, ge=0, le=100 * MAX_COUNT)


class SchedulePolicy(StrictModel):
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


class PartitionsPolicy(StrictModel):
    """Partitioned maintenance: backfills and retries of the rewrite (read when definitions load)."""

    # A backfill launches one run per this many partitions (Dagster BackfillPolicy.multi_run).
    partitions_per_run: int = Field(10, ge=1, le=10_000)
    # The rewrite op retries partitions that failed this often, waiting delay x 2^attempt (+/- jitter).
    max_retries: int = Field(2, ge=0, le=10)
    retry_delay_seconds: float = Field(30.0, ge=0, le=3600)


class ConfigurationPolicy(StrictModel):
    """Settings every table must carry; the table_configuration check reports violations."""

    min_format_version: Literal[1, 2, 3] | None = None
    # Compared with write.format.default (Iceberg's default when unset: parquet).
    file_format: Literal["parquet", "orc", "avro"] | None = None
    # Compared with write.distribution-mode; unset on the table is a violation (engines then choose).
    write_distribution_mode: Literal["none", "hash", "range"] | None = None
    # Any other property that must hold exactly this value.
    required_properties: dict[str, str] = {}
    severity: Literal["warn", "error"] = "warn"


class LoopPolicy(StrictModel):
    """The closed loop: what a run does when its ops left their findings failing (maintenance/results/effect.py)."""

    # warn: the run succeeds, its checks stay failed and it carries the tag icelake/outcome=ineffective;
    # fail: the run fails naming the ops and findings.
    on_ineffective: Literal["warn", "fail"] = "warn"
    # The sensor does not relaunch an ineffective plan on an unchanged table (same policy, no writer
    # commit since) before this many hours.
    relaunch_backoff_hours: float = Field(24.0, gt=0, le=24 * 30)
    # Validation also reads the table with DuckDB and pyiceberg (row count and a column checksum).
    cross_engine_check: bool = False
    # Proof of benefit also times a full-scan query on the snapshots before and after, in the run's
    # Spark session (maintenance/verify/scan_probe.py), for tables up to scan_probe_max_bytes.
    scan_probe: bool = False
    scan_probe_max_bytes: int = Field(GiB, ge=1, le=MAX_REWRITE_BYTES)
    # The query the probe times instead of a full scan: one a table's readers run (bench.loop.query_bench's
    # kinds: a filter on the partition column, a point lookup, an aggregate). A SELECT naming the
    # table as {table}, which the probe replaces with the quoted table at each snapshot. From the
    # settings file only (never a table property): whoever edits it is trusted.
    scan_probe_query: str | None = Field(None, min_length=1, max_length=2000)

    @field_validator("scan_probe_query")
    @classmethod
    def _one_select_of_the_table(cls, value: str | None) -> str | None:
        if value is None:
            return None
        text = value.strip()
        if not re.match(r"(?i)^(select|with)\b", text):
            raise ValueError("scan_probe_query must be a SELECT (or WITH ... SELECT) query")
        if ";" in text:
            raise ValueError("scan_probe_query must be one statement (no ';')")
        if text.count("{table}") != 1 or re.search(r"\{(?!table\})", text):
            raise ValueError(
                "scan_probe_query must name the table exactly once as {table}, and no other {...}"
            )
        return text


class LineagePolicy(StrictModel):
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


class Policy(StrictModel):
    # Layered per table (see icelake_assets.policies): defaults < catalog < namespace < table < properties.
    mode: Mode = DEFAULT_MODE
    small_files: SmallFilesPolicy = SmallFilesPolicy()
    snapshots: SnapshotPolicy = SnapshotPolicy()
    orphans: OrphanPolicy = OrphanPolicy()
    manifests: ManifestPolicy = ManifestPolicy()
    delete_files: DeleteFilesPolicy = DeleteFilesPolicy()
    layout: LayoutPolicy = LayoutPolicy()
    statistics: StatisticsPolicy = StatisticsPolicy()
    activity: ActivityPolicy = ActivityPolicy()
    guards: GuardsPolicy = GuardsPolicy()
    operations: OperationsPolicy = OperationsPolicy()
    sensor: SensorPolicy = SensorPolicy()
    packing: PackingPolicy = PackingPolicy()
    schedule: SchedulePolicy = SchedulePolicy()
    configuration: ConfigurationPolicy = ConfigurationPolicy()
    partitions: PartitionsPolicy = PartitionsPolicy()
    loop: LoopPolicy = LoopPolicy()
    lineage: LineagePolicy = LineagePolicy()
    retention: RetentionPolicy = RetentionPolicy()
    restore_points: RestorePointPolicy = RestorePointPolicy()
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


class PolicyLayers(StrictModel):
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
