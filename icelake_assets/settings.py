"""Typed settings for icelake_assets, loaded from one YAML file.

The file is found through ``$ICELAKE_CONFIG``, else ``./icelake.yaml``; when neither exists the
embedded default (a SQLite SQL catalog plus a local warehouse under ``./.lake``) is used, so the demo
needs no server. Relative paths in catalog properties are resolved against the file's folder.
"""

from __future__ import annotations

import fnmatch
import os
from pathlib import Path
from typing import Any, Literal, Mapping

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

CONFIG_ENV_VAR = "ICELAKE_CONFIG"
DEFAULT_CONFIG_FILE = "icelake.yaml"
# Namespace the product writes its own tables to (audit log); never maintained as a user table.
INTERNAL_NAMESPACE = "icelake"
MIN_ORPHAN_AGE_HOURS = 24.0  # Iceberg refuses younger orphans: a file may belong to a running commit.

MiB = 1024 * 1024


class SettingsError(ValueError):
    """A settings file that cannot be used; the message names the file, the key and the cause."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SmallFilesPolicy(_Strict):
    # Seed 000's diagnostic: a partition with more than 20 files averaging under 128 MB.
    max_files_per_partition: int = Field(20, ge=1)
    max_avg_file_bytes: int = Field(128 * MiB, ge=1)
    # Target of rewrites unless the table sets write.target-file-size-bytes.
    target_file_size_bytes: int = Field(128 * MiB, ge=MiB)
    # A file under this fraction of the target counts as small (Amoro: 0.75).
    small_file_ratio: float = Field(0.75, gt=0, le=1)
    # Iceberg's min-input-files: fewer files per group are not worth a rewrite.
    min_input_files: int = Field(5, ge=2)
    strategy: Literal["binpack", "sort"] = "binpack"
    sort_order: tuple[str, ...] = ()


class SnapshotPolicy(_Strict):
    # expire_snapshots acts when the table holds more snapshots than this ...
    max_count: int = Field(100, ge=1)
    # ... or when its oldest snapshot is older than this (Iceberg default: 5 days).
    max_age_hours: float = Field(120.0, gt=0)
    # Never keep fewer than this many snapshots (history.expire.min-snapshots-to-keep wins).
    min_keep: int = Field(5, ge=1)


class OrphanPolicy(_Strict):
    older_than_hours: float = Field(72.0)
    # remove_orphan_files acts when more orphans than this are found.
    max_count: int = Field(0, ge=0)

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
    max_count: int = Field(50, ge=1)


class Policy(_Strict):
    small_files: SmallFilesPolicy = SmallFilesPolicy()
    snapshots: SnapshotPolicy = SnapshotPolicy()
    orphans: OrphanPolicy = OrphanPolicy()
    manifests: ManifestPolicy = ManifestPolicy()


class TableSelection(_Strict):
    # fnmatch patterns over "catalog.namespace.table" or "namespace.table".
    include: tuple[str, ...] = ("*",)
    exclude: tuple[str, ...] = ()


class SparkSettings(_Strict):
    master: str = "local[2]"
    # Maven coordinates; when set, the Iceberg runtime is downloaded instead of taken from the wheel.
    packages: tuple[str, ...] = ()
    config: dict[str, str] = {}


class Settings(_Strict):
    catalogs: dict[str, dict[str, str]]
    tables: TableSelection = TableSelection()
    thresholds: Policy = Policy()
    spark: SparkSettings = SparkSettings()
    source: str = "<embedded default>"

    @field_validator("catalogs")
    @classmethod
    def _catalogs(cls, v: dict[str, dict[str, str]]) -> dict[str, dict[str, str]]:
        if not v:
            raise ValueError("at least one catalog is required")
        for name, props in v.items():
            if not name.replace("_", "").isalnum():
                raise ValueError(f"catalog name {name!r} must be letters, digits and '_'")
            if "type" not in props and "uri" not in props:
                raise ValueError(f"catalog {name!r} needs a 'type' (sql, rest, glue, hive) or a 'uri'")
        return v

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

    def policy_for(self, table_properties: Mapping[str, str] | None = None) -> Policy:
        """The effective policy of a table: the settings' thresholds, then the table's own properties."""
        props = table_properties or {}
        policy = self.thresholds
        sf, snap = policy.small_files, policy.snapshots
        if "write.target-file-size-bytes" in props:
            sf = sf.model_copy(update={"target_file_size_bytes": int(props["write.target-file-size-bytes"])})
        if "history.expire.min-snapshots-to-keep" in props:
            snap = snap.model_copy(update={"min_keep": int(props["history.expire.min-snapshots-to-keep"])})
        if "history.expire.max-snapshot-age-ms" in props:
            snap = snap.model_copy(
                update={"max_age_hours": int(props["history.expire.max-snapshot-age-ms"]) / 3_600_000}
            )
        return policy.model_copy(update={"small_files": sf, "snapshots": snap})


def _resolve_paths(props: dict[str, Any], base: Path) -> dict[str, str]:
    """Make relative SQLite and warehouse paths absolute against the settings folder."""
    out = {k: str(v) for k, v in props.items()}
    uri = out.get("uri", "")
    if uri.startswith("sqlite:///") and not uri.startswith("sqlite:////"):
        out["uri"] = "sqlite:///" + str((base / uri[len("sqlite:///"):]).resolve())
    wh = out.get("warehouse")
    if wh and "://" not in wh and not wh.startswith("file:"):
        out["warehouse"] = (base / wh).resolve().as_uri()
    return out


def default_settings(base: Path | None = None) -> Settings:
    """The embedded demo lake: a SQLite SQL catalog and a local warehouse under ``<base>/.lake``."""
    base = (base or Path.cwd()).resolve()
    lake = base / ".lake"
    return Settings(
        catalogs={
            "demo": {
                "type": "sql",
                "uri": f"sqlite:///{lake / 'catalog.db'}",
                "warehouse": (lake / "warehouse").as_uri(),
            }
        }
    )


def _format_validation_error(source: str, err: ValidationError) -> str:
    lines = [f"invalid settings in {source}:"]
    for e in err.errors():
        key = ".".join(str(p) for p in e["loc"]) or "<root>"
        msg = e["msg"]
        if e["type"] == "extra_forbidden":
            msg = "unknown key"
        lines.append(f"  {key}: {msg} (got {e.get('input')!r})")
    return "\n".join(lines)


def parse_settings(data: Any, source: str, base: Path) -> Settings:
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise SettingsError(f"invalid settings in {source}: the top level must be a mapping, got {type(data).__name__}")
    data = dict(data)
    if "catalogs" not in data:
        data["catalogs"] = default_settings(base).catalogs
    elif isinstance(data["catalogs"], dict):
        catalogs = {}
        for name, props in data["catalogs"].items():
            if not isinstance(props, dict):
                raise SettingsError(f"invalid settings in {source}:\n  catalogs.{name}: must be a mapping of properties")
            catalogs[name] = _resolve_paths(props, base)
        data["catalogs"] = catalogs
    data["source"] = source
    try:
        return Settings.model_validate(data)
    except ValidationError as err:
        raise SettingsError(_format_validation_error(source, err)) from None


def load_settings(path: str | os.PathLike[str] | None = None) -> Settings:
    """Load settings from ``path``, else ``$ICELAKE_CONFIG``, else ``./icelake.yaml``, else the default."""
    explicit = path or os.environ.get(CONFIG_ENV_VAR)
    candidate = Path(explicit) if explicit else Path.cwd() / DEFAULT_CONFIG_FILE
    if not candidate.exists():
        if explicit:
            raise SettingsError(f"settings file {candidate} does not exist (from {'argument' if path else CONFIG_ENV_VAR})")
        return default_settings()
    try:
        data = yaml.safe_load(candidate.read_text())
    except yaml.YAMLError as err:
        raise SettingsError(f"settings file {candidate} is not valid YAML: {err}") from None
    return parse_settings(data, str(candidate), candidate.resolve().parent)
