"""Resolution: one table's effective policy from the layers of the settings file and its properties
(the precedence is described in :mod:`icelake_assets.policies`)."""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Mapping
from dataclasses import replace
from functools import lru_cache
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from icelake_assets.policies.display import DEFAULT_SOURCE, EffectivePolicy, PolicyValue, format_value
from icelake_assets.policies.properties import (
    DIRECTION_WORDS,
    LeafPath,
    PropertyLeaf,
    policy_leaves,
    property_rule,
    table_property_leaves,
)
from icelake_assets.settings import Policy, Settings, SettingsError, dotted
from icelake_assets.types import TableRef


class PolicyError(SettingsError):
    """Layers of the settings file that combine into an invalid policy for some table."""


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
                f"a table property may only {DIRECTION_WORDS[rule]} {dotted(leaf.path)} "
                f"(it keeps {format_value(old)} from {_source_words(current_source)})"
            ),
        )
    return built, candidate, None


def _checked(ref: object) -> TableRef | None:
    """``ref`` itself; anything but a TableRef (or None) is the caller's mistake, said plainly."""
    if ref is None or isinstance(ref, TableRef):
        return ref
    raise TypeError(
        f"a policy is resolved for a TableRef (or None: the lake's defaults), not {type(ref).__name__}: "
        "convert a name with TableRef.parse and a pyiceberg Table with catalog.connection.table_ref"
    )


def resolve_policy(
    settings: Settings, ref: TableRef | None, properties: Mapping[str, str] | None = None
) -> EffectivePolicy:
    """The effective policy of table ``ref`` given its properties.

    With ``ref`` None only the file's defaults (``thresholds``, ``policies.defaults``) and the
    properties apply. Raises PolicyError when the file's layers combine into an invalid policy;
    invalid table properties are ignored and listed as problems."""
    ref = _checked(ref)
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


def policy_for(
    settings: Settings, ref: TableRef | None, properties: Mapping[str, str] | None = None
) -> Policy:
    """The effective policy of table ``ref`` with its properties (see :func:`resolve_policy`)."""
    return resolve_policy(settings, ref, properties).policy
