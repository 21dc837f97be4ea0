"""Policies as code: the effective policy of one table, the source of each of its values, and what a
mode lets automation do.

Precedence, lowest first (a later layer wins for every key it sets; keys it does not set are inherited):

1. built-in defaults of :class:`~icelake_assets.settings.Policy` (source ``default``);
2. ``thresholds`` of the settings file (the defaults of every table);
3. ``policies.defaults``;
4. ``policies.catalogs[<catalog pattern>]``;
5. ``policies.namespaces[<pattern>]``, matched against ``namespace`` and ``catalog.namespace``;
6. ``policies.tables[<pattern>]``, matched against ``namespace.table`` and ``catalog.namespace.table``;
7. the table's Iceberg properties: ``write.target-file-size-bytes``, ``history.expire.min-snapshots-to-keep``,
   ``history.expire.max-snapshot-age-ms``;
8. the table's ``icelake.<key>`` properties, e.g. ``icelake.snapshots.min_keep=50``,
   ``icelake.owners=team:data,ana@example.com``, ``icelake.tags.tier=gold``.

Table properties (7, 8) can only tighten what the settings file set: only the keys of
:data:`PROPERTY_ALLOWLIST` are read, each only in its safe direction (keep more snapshots, older orphans,
lower caps, longer quiet periods; owners and tags are only added). Mode, operations, schedules, the
sensor, retries and every other key come from the settings file only.

Within one level several patterns may match: the one with more literal (non-wildcard) characters is more
specific and wins; on a tie the one written later in the file wins. Mappings (``tags``,
``configuration.required_properties``) merge key by key; lists (``owners``, ``operations.enabled``) are
replaced whole. A table property that is invalid, not allowlisted or moves a value the unsafe way is
ignored and reported with the reason (a problem of the table, shown by the ``table_configuration``
check and ``icelake policy TABLE``); an invalid settings file is an error.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

from pydantic import BaseModel, ValidationError

from icelake_assets.settings import (
    ConfigurationPolicy,
    Mode,
    Policy,
    SchedulePolicy,
    Settings,
    SettingsError,
    dotted,
)
from icelake_assets.types import TableRef

LeafPath = tuple[str, ...]
Action = Literal["launch", "record", "nothing"]
PROPERTY_PREFIX = "icelake."
DEFAULT_SOURCE = "default"
MODE_TAG = "icelake/mode"

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
    "manifests.max_count": "up",
    "small_files.max_files_per_partition": "up",
    "small_files.min_input_files": "up",
    "small_files.max_concurrent_file_group_rewrites": "down",
    "small_files.target_file_size_bytes": "bounded",  # the table's own write.target-file-size-bytes
    "delete_files.max_file_ratio": "up",
    "delete_files.max_record_ratio": "up",
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
_DIRECTION_WORDS = {"up": "raise", "down": "lower"}


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


class PolicyError(SettingsError):
    """Layers of the settings file that combine into an invalid policy for some table."""


@dataclass(frozen=True)
class PolicyValue:
    key: str  # dotted policy key, e.g. snapshots.min_keep
    value: Any
    source: str  # e.g. "icelake.yaml policies.namespaces['taxi'].snapshots.min_keep"


@dataclass(frozen=True)
class EffectivePolicy:
    """One table's policy, where each of its values came from, and table properties that were ignored."""

    table: str
    policy: Policy
    values: tuple[PolicyValue, ...]
    problems: tuple[str, ...] = ()

    @property
    def mode(self) -> Mode:
        return self.policy.mode

    @property
    def owners(self) -> tuple[str, ...]:
        return self.policy.owners

    @property
    def tags(self) -> dict[str, str]:
        return dict(self.policy.tags)

    @property
    def schedule(self) -> SchedulePolicy:
        return self.policy.schedule

    def source_of(self, key: str) -> str:
        for v in self.values:
            if v.key == key:
                return v.source
        raise KeyError(f"{key!r} is not a policy key (keys: {', '.join(v.key for v in self.values)})")

    def value_of(self, key: str) -> Any:
        for v in self.values:
            if v.key == key:
                return v.value
        raise KeyError(f"{key!r} is not a policy key")

    def asset_tags(self) -> dict[str, str]:
        """Dagster asset tags: the policy's tags plus its mode (filterable in the UI)."""
        return {**self.policy.tags, MODE_TAG: self.mode}

    def overridden(self) -> tuple[PolicyValue, ...]:
        """The values that do not come from the built-in defaults."""
        return tuple(v for v in self.values if v.source != DEFAULT_SOURCE)


def format_value(value: Any) -> str:
    """A policy value as printed (command line, asset metadata)."""
    if isinstance(value, tuple):
        return ", ".join(map(str, value)) or "(none)"
    return "(none)" if value is None else str(value)


# ---------------------------------------------------------------------------- leaves of a policy


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


@lru_cache(maxsize=1)
def _default_values() -> dict[LeafPath, tuple[Any, str]]:
    return {p: (v, DEFAULT_SOURCE) for p, v in policy_leaves(Policy()).items()}


def _unflatten(leaves: Mapping[LeafPath, Any]) -> dict[str, Any]:
    nested: dict[str, Any] = {}
    for path, value in leaves.items():
        node = nested
        for part in path[:-1]:
            node = node.setdefault(part, {})
        node[path[-1]] = value
    return nested


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


# ---------------------------------------------------------------------------- resolution


def ref_of_table(table: Any) -> TableRef:
    """The TableRef of a loaded pyiceberg table (its catalog's name plus its identifier)."""
    ident = tuple(table.name())
    return TableRef(table.catalog.name, ident[:-1], ident[-1])


def _as_ref(settings: Settings, table: Any) -> TableRef | None:
    if table is None or isinstance(table, TableRef):
        return table
    if isinstance(table, str):
        return TableRef.parse(table, default_catalog=next(iter(settings.catalogs)))
    if hasattr(table, "catalog") and hasattr(table, "name") and callable(table.name):
        return ref_of_table(table)
    raise TypeError(
        f"a table is a TableRef, 'catalog.namespace.table' or a pyiceberg Table, not {type(table).__name__}"
    )


def _specificity(pattern: str) -> int:
    return sum(1 for c in pattern if c not in "*?[]")


def _matching(entries: Mapping[str, Policy], names: tuple[str, ...]) -> list[tuple[str, Policy]]:
    """Entries whose pattern matches one of ``names``, least specific first (stable: file order on ties)."""
    hits = [(p, pol) for p, pol in entries.items() if any(fnmatch.fnmatchcase(n, p) for n in names)]
    return sorted(hits, key=lambda hit: _specificity(hit[0]))


def _file_label(settings: Settings) -> str:
    path = Path(settings.source)
    return path.name if path.suffix in (".yaml", ".yml") else settings.source


def settings_layers(settings: Settings, ref: TableRef | None) -> list[tuple[str, Policy]]:
    """The file's layers that apply to ``ref``, lowest precedence first, each with its key prefix."""
    layers: list[tuple[str, Policy]] = [
        ("thresholds", settings.thresholds),
        ("policies.defaults", settings.policies.defaults),
    ]
    if ref is None:
        return layers
    ns = ref.namespace_name
    p = settings.policies
    layers += [(f"policies.catalogs[{k!r}]", v) for k, v in _matching(p.catalogs, (ref.catalog,))]
    layers += [
        (f"policies.namespaces[{k!r}]", v) for k, v in _matching(p.namespaces, (ns, f"{ref.catalog}.{ns}"))
    ]
    layers += [
        (f"policies.tables[{k!r}]", v)
        for k, v in _matching(p.tables, (f"{ns}.{ref.name}", f"{ref.catalog}.{ns}.{ref.name}"))
    ]
    return layers


def _catalog_rules(settings: Settings, ref: TableRef | None, policy: Policy) -> None:
    """Rules that depend on the table's catalog, not expressible in the model alone."""
    if ref is None or ref.catalog not in settings.catalogs:
        return
    uri = settings.catalogs[ref.catalog].get("uri", "")
    if uri.startswith("sqlite:") and policy.small_files.max_concurrent_file_group_rewrites > 1:
        raise ValueError(
            "small_files.max_concurrent_file_group_rewrites: must be 1 on a SQLite catalog "
            "(one writer: concurrent group commits fail and partial progress drops them)"
        )


def _build(settings: Settings, ref: TableRef | None, values: Mapping[LeafPath, tuple[Any, str]]) -> Policy:
    policy = Policy.model_validate(_unflatten({p: v for p, (v, _) in values.items()}))
    _catalog_rules(settings, ref, policy)
    return policy


def _explain(err: Exception, values: Mapping[LeafPath, tuple[Any, str]]) -> str:
    """An invalid combination, each offending key with the source it came from."""
    if not isinstance(err, ValidationError):
        return str(err)
    lines = []
    for e in err.errors():
        loc = tuple(str(x) for x in e["loc"])
        sources = sorted(
            {src for p, (_, src) in values.items() if p[: len(loc)] == loc and src != DEFAULT_SOURCE}
        )
        lines.append(
            f"{dotted(loc) or '<policy>'}: {e['msg'].removeprefix('Value error, ')}"
            + (f" (from {'; '.join(sources)})" if sources else "")
        )
    return "; ".join(lines)


def _source_words(source: str) -> str:
    return "the built-in default" if source == DEFAULT_SOURCE else source


Values = dict[LeafPath, tuple[Any, str]]  # policy path → (value, source)


def _tighten(
    settings: Settings, ref: TableRef | None, policy: Policy, values: Values, leaf: PropertyLeaf
) -> tuple[Policy, Values, str | None]:
    """Apply one table property if its key is allowlisted and it moves the value toward safety;
    else keep the policy and say why."""
    rule = property_rule(leaf.path)
    if rule not in ("up", "down", "bounded", "add"):
        return policy, values, rule
    value, source = leaf.value, leaf.source
    current, current_source = values.get(leaf.path, (None, DEFAULT_SOURCE))
    if rule == "add" and isinstance(
        current, tuple
    ):  # owners, lineage: added to the file's, never replace them
        value = tuple(dict.fromkeys((*current, *value)))
        source = f"{current_source} + {source}" if current else source
    elif leaf.path[0] == "tags" and current is not None and current_source != DEFAULT_SOURCE:
        if str(current) != str(value):
            return (
                policy,
                values,
                (f"tags.{leaf.path[1]} is set by {current_source} ({current!r}): tags are only added"),
            )
    candidate = {**values, leaf.path: (value, source)}
    try:
        built = _build(settings, ref, candidate)
    except (ValidationError, ValueError) as err:
        return policy, values, _explain(err, {})
    new, old = policy_leaves(built)[leaf.path], policy_leaves(policy).get(leaf.path)
    if (rule == "up" and new < old) or (rule == "down" and new > old):
        return (
            policy,
            values,
            (
                f"a table property may only {_DIRECTION_WORDS[rule]} {dotted(leaf.path)} "
                f"(it keeps {format_value(old)} from {_source_words(current_source)})"
            ),
        )
    return built, candidate, None


def resolve_policy(
    settings: Settings, table: Any = None, properties: Mapping[str, str] | None = None
) -> EffectivePolicy:
    """The effective policy of ``table`` (TableRef, name or pyiceberg Table) given its properties.

    Without a table only the defaults and the properties apply (``resolve_policy(settings, properties)``
    is that form too). Raises PolicyError when the file's layers combine into an invalid policy;
    invalid table properties are ignored and listed as problems."""
    if table is not None and isinstance(table, Mapping):
        table, properties = None, table
    ref = _as_ref(settings, table)
    if (
        properties is None
        and table is not None
        and hasattr(table, "properties")
        and not isinstance(table, (str, TableRef))
    ):
        properties = table.properties
    label = _file_label(settings)
    values: dict[LeafPath, tuple[Any, str]] = dict(_default_values())
    for prefix, layer in settings_layers(settings, ref):
        for path, value in policy_leaves(layer, explicit_only=True).items():
            values[path] = (value, f"{label} {prefix}.{dotted(path)}")
    name = str(ref) if ref else "<any table>"
    try:
        policy = _build(settings, ref, values)
    except (ValidationError, ValueError) as err:
        raise PolicyError(
            f"invalid policy for {name} in {settings.source}: {_explain(err, values)}"
        ) from None

    leaves, problems = table_property_leaves(properties or {})
    for leaf in leaves:  # one by one: each is checked against what the layers below it set
        policy, values, problem = _tighten(settings, ref, policy, values, leaf)
        if problem:
            problems.append(f"{leaf.source}={leaf.raw!r} ignored: {problem}")

    final = policy_leaves(policy)
    rows = tuple(
        PolicyValue(dotted(p), v, values.get(p, (None, DEFAULT_SOURCE))[1]) for p, v in final.items()
    )
    return EffectivePolicy(name, policy, rows, tuple(problems))


def resolve_policies(
    settings: Settings, tables: Iterable[tuple[TableRef, Mapping[str, str]]]
) -> dict[TableRef, EffectivePolicy]:
    """:func:`resolve_policy` of many tables (the definitions of a lake): tables in the same catalog
    with the same settings layers and the same policy properties share one resolution (at 10,000
    tables, resolving each costs seconds)."""
    memo: dict[tuple[Any, ...], EffectivePolicy] = {}
    out: dict[TableRef, EffectivePolicy] = {}
    for ref, properties in tables:
        leaves, problems = table_property_leaves(properties)
        key = (
            ref.catalog,
            tuple(prefix for prefix, _ in settings_layers(settings, ref)),
            tuple((leaf.source, leaf.raw) for leaf in leaves),
            tuple(problems),
        )
        if key not in memo:
            memo[key] = resolve_policy(settings, ref, properties)
        out[ref] = replace(memo[key], table=str(ref))
    return out


def policy_for(settings: Settings, table: Any = None, properties: Mapping[str, str] | None = None) -> Policy:
    """The effective policy of ``table`` with its properties (see :func:`resolve_policy`)."""
    return resolve_policy(settings, table, properties).policy


# ---------------------------------------------------------------------------- modes


def decide_action(mode: Mode, wants_to_act: bool) -> Action:
    """What a sensor tick does with a table whose thresholds say ``wants_to_act``.

    observe: checks only, nothing is recorded or launched; propose: the would-be run is recorded
    (an observation), nothing is launched; enforce: the run is launched."""
    if mode not in ("observe", "propose", "enforce"):
        raise ValueError(f"unknown mode {mode!r}: expected 'observe', 'propose' or 'enforce'")
    if not wants_to_act or mode == "observe":
        return "nothing"
    return "launch" if mode == "enforce" else "record"


# ---------------------------------------------------------------------------- configuration policies


@dataclass(frozen=True)
class Violation:
    setting: str  # table property or metadata field
    required: str
    actual: str

    @property
    def message(self) -> str:
        return f"{self.setting} is {self.actual}, required {self.required}"


def configuration_violations(
    format_version: int, properties: Mapping[str, str], required: ConfigurationPolicy
) -> list[Violation]:
    """Where a table's metadata misses the settings the policy requires."""
    out: list[Violation] = []
    if required.min_format_version is not None and format_version < required.min_format_version:
        out.append(Violation("format-version", f">= {required.min_format_version}", str(format_version)))
    if required.file_format is not None:
        actual = properties.get("write.format.default", "parquet").lower()  # Iceberg's default
        if actual != required.file_format:
            out.append(Violation("write.format.default", required.file_format, actual))
    if required.write_distribution_mode is not None:
        mode = properties.get("write.distribution-mode")
        if mode is None or mode.lower() != required.write_distribution_mode:
            out.append(
                Violation("write.distribution-mode", required.write_distribution_mode, mode or "unset")
            )
    for key, value in sorted(required.required_properties.items()):
        current = properties.get(key)
        if current != value:
            out.append(Violation(key, value, "unset" if current is None else current))
    return out


@dataclass(frozen=True)
class ConfigurationReport:
    violations: list[Violation] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not self.violations and not self.problems


def configuration_report(
    format_version: int, properties: Mapping[str, str], effective: EffectivePolicy
) -> ConfigurationReport:
    """Violations of the required settings plus the table's ignored policy properties."""
    return ConfigurationReport(
        configuration_violations(format_version, properties, effective.policy.configuration),
        list(effective.problems),
    )
