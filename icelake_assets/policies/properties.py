"""The policy keys a table property may set, and reading them from a table's properties.

Anyone who can write a table can set its properties, so they may only tighten what the operator set
(see :mod:`icelake_assets.policies` for the precedence): this module says which keys, in which
direction, and turns properties into policy leaves; :mod:`~icelake_assets.policies.resolve` applies them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, get_args, get_origin

from pydantic import BaseModel

from icelake_assets.settings import Policy, dotted

LeafPath = tuple[str, ...]
PROPERTY_PREFIX = "icelake."

# Iceberg's own table properties, mapped to policy keys (value converters may raise ValueError).
ICEBERG_PROPERTIES: dict[str, tuple[LeafPath, Any]] = {
    "write.target-file-size-bytes": (("small_files", "target_file_size_bytes"), int),
    "history.expire.min-snapshots-to-keep": (("snapshots", "min_keep"), int),
    "history.expire.max-snapshot-age-ms": (("snapshots", "max_age_hours"), lambda v: int(v) / 3_600_000),
}

# Anyone who can write a table can set its properties: they may only tighten what the operator set.
# The keys a table property may set and the one way each may move the settings file's value:
# "up" keeps more or acts less, "down" lowers a cap, "bounded" any value within the model's bounds,
# "add" only adds (descriptive keys: owners, tags, lineage). Every other key comes from the settings file only.
Direction = Literal["up", "down", "bounded", "add"]
PROPERTY_ALLOWLIST: dict[str, Direction] = {
    "snapshots.min_keep": "up",
    "snapshots.max_age_hours": "up",
    "snapshots.max_count": "up",
    "snapshots.min_age_hours": "up",
    "orphans.older_than_hours": "up",
    "orphans.max_count": "up",
    "orphans.recovery_window_hours": "up",
    "manifests.max_count": "up",
    "small_files.max_files_per_partition": "up",
    "small_files.min_input_files": "up",
    "small_files.max_concurrent_file_group_rewrites": "down",
    "small_files.target_file_size_bytes": "bounded",  # the table's own write.target-file-size-bytes
    "delete_files.max_file_ratio": "up",
    "delete_files.max_record_ratio": "up",
    "statistics.max_stale_ratio": "up",
    # Rows kept longer (the settings file turns retention on and names the column).
    "retention.keep_days": "up",
    "retention.max_delete_fraction": "down",
    "statistics.min_rows": "up",
    "guards.quiet_period_minutes": "up",
    "guards.max_rewrite_bytes": "down",
    "owners": "add",
    "tags": "add",
    # Lineage only draws edges in the asset graph (writer -> table -> reader): it cannot loosen a guard.
    "lineage.producers": "add",
    "lineage.consumers": "add",
}
# Why a key outside the allowlist is ignored, by section (the rest: the generic reason).
_SETTINGS_ONLY: dict[str, str] = {
    "mode": "only the settings file sets the mode",
    "operations": "only the settings file enables operations",
    "schedule": "only the settings file sets schedules",
    "sensor": "only the settings file sets the sensor interval (one interval for the whole lake)",
    "partitions": "only the settings file sets partitioned runs and their retries",
    "configuration": "only the settings file sets what tables must carry",
    "guards": "only the settings file sets this guard",
}
DIRECTION_WORDS = {"up": "raise", "down": "lower"}  # how a rule reads in a refusal


def property_rule(path: LeafPath) -> Direction | str:
    """The direction a table property may move ``path``, or why it may not set it at all."""
    key = "tags" if path[0] == "tags" else dotted(path)
    if key in PROPERTY_ALLOWLIST:
        return PROPERTY_ALLOWLIST[key]
    if path[0] in _SETTINGS_ONLY:
        return _SETTINGS_ONLY[path[0]]
    return f"only the settings file sets {dotted(path)} (a table property may set {allowed_property_keys()})"


def allowed_property_keys() -> str:
    """The ``icelake.*`` properties a table may set, as listed in messages."""
    return ", ".join(PROPERTY_PREFIX + (f"{k}.<key>" if k == "tags" else k) for k in PROPERTY_ALLOWLIST)


def policy_leaves(model: BaseModel, explicit_only: bool = False) -> dict[LeafPath, Any]:
    """Flatten a policy into ``path → value``; mapping fields give one leaf per key.

    ``explicit_only`` keeps only what a layer of the file actually wrote (pydantic's fields_set)."""
    out: dict[LeafPath, Any] = {}
    for name in type(model).model_fields:
        if explicit_only and name not in model.model_fields_set:
            continue
        value = getattr(model, name)
        if isinstance(value, BaseModel):
            out.update({(name, *p): v for p, v in policy_leaves(value, explicit_only).items()})
        elif isinstance(value, dict):
            out.update({(name, str(k)): v for k, v in value.items()})
        else:
            out[(name,)] = value
    return out


def _property_leaf(name: str) -> tuple[LeafPath, Any] | None:
    """The policy path (and its annotation) an ``icelake.<key>`` property names, else None."""
    parts = name[len(PROPERTY_PREFIX) :].split(".")
    model: type[BaseModel] = Policy
    path: list[str] = []
    for i, part in enumerate(parts):
        info = model.model_fields.get(part)
        if info is None:
            return None
        ann = info.annotation
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            model, path = ann, [*path, part]
            continue
        if get_origin(ann) is dict:
            rest = ".".join(parts[i + 1 :])
            return ((*path, part, rest), str) if rest else None
        return ((*path, part), ann) if i == len(parts) - 1 else None
    return None


def _convert(value: str, ann: Any) -> Any:
    """A property string for a policy field; pydantic does the rest (int, float, bool, literals)."""
    if get_origin(ann) is tuple:
        return tuple(v.strip() for v in value.split(",") if v.strip())
    if type(None) in get_args(ann) and value.strip().lower() in ("", "none", "null"):
        return None
    return value


@dataclass(frozen=True)
class PropertyLeaf:
    path: LeafPath
    value: Any  # converted for the policy model (pydantic validates it)
    source: str  # e.g. "table property icelake.snapshots.min_keep"
    raw: str  # the property's text, as reported


def table_property_leaves(properties: Mapping[str, str]) -> tuple[list[PropertyLeaf], list[str]]:
    """Policy values set by table properties, Iceberg's first, then ``icelake.*``; and problems."""
    leaves: list[PropertyLeaf] = []
    problems: list[str] = []
    for name, (path, conv) in ICEBERG_PROPERTIES.items():
        if name in properties:
            try:
                leaves.append(
                    PropertyLeaf(path, conv(properties[name]), f"table property {name}", properties[name])
                )
            except ValueError:
                problems.append(f"table property {name}={properties[name]!r} ignored: not a number")
    for name in sorted(properties):
        if not name.startswith(PROPERTY_PREFIX):
            continue
        found = _property_leaf(name)
        if found is None:
            problems.append(
                f"table property {name} ignored: unknown policy key (a table property may set "
                f"{allowed_property_keys()})"
            )
            continue
        path, ann = found
        leaves.append(
            PropertyLeaf(path, _convert(properties[name], ann), f"table property {name}", properties[name])
        )
    return leaves, problems
