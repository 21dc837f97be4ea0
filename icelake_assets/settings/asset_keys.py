"""How a table's Dagster asset key is made from its Iceberg name (``asset_keys`` in icelake.yaml, or
the Component's and the factory's arguments).

The default keeps the exact Iceberg name (``catalog/namespace.../table``). A project that already
names its tables otherwise (dagster-iceberg's ``namespace/table``, a team prefix) sets a template
and/or a prefix, so the product's checks and maintenance land on the keys the project uses.
Dagster-free: the path is a list of strings, orchestration/names.py makes it an AssetKey."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, field_validator

if TYPE_CHECKING:
    from icelake_assets.types import TableRef

DEFAULT_TEMPLATE = "{catalog}/{namespace}/{table}"
_FIELDS = ("catalog", "namespace", "table")
_PLACEHOLDER = re.compile(r"\{([^{}]*)\}")


class AssetKeySettings(BaseModel):
    """``prefix``: path parts put before every key; ``template``: the key's parts separated by ``/``,
    from ``{catalog}``, ``{namespace}`` (every namespace level, each its own part) and ``{table}``;
    ``defined_by_project``: the project's own code defines the tables' assets (it writes them), so the
    product defines no table asset: its checks attach to the project's keys and its maintenance runs
    as jobs that record observations on them, never materializations (docs/embedding.md)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    prefix: tuple[str, ...] = ()
    template: str = DEFAULT_TEMPLATE
    defined_by_project: bool = False

    @field_validator("prefix")
    @classmethod
    def _prefix_parts(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        if any(not part or "/" in part for part in v):
            raise ValueError(f"prefix {list(v)!r}: each part must be non-empty and without '/'")
        return v

    @field_validator("template")
    @classmethod
    def _known_fields(cls, v: str) -> str:
        unknown = sorted({name for name in _PLACEHOLDER.findall(v) if name not in _FIELDS})
        if unknown:
            raise ValueError(
                f"template {v!r}: unknown field(s) {unknown}; use {{catalog}}, {{namespace}}, {{table}}"
            )
        if "{table}" not in v:
            raise ValueError(f"template {v!r} must contain {{table}}: two tables would share a key")
        if any(not part for part in v.split("/")):
            raise ValueError(f"template {v!r} has an empty part (a leading, trailing or double '/')")
        return v

    def path(self, ref: TableRef) -> list[str]:
        """The asset key path of ``ref``: the prefix, then the template's parts filled in (the
        namespace expands to its levels; text around a field stays in that part)."""
        parts: list[str] = list(self.prefix)
        for part in self.template.split("/"):
            if part == "{namespace}":
                parts.extend(ref.namespace)
            else:
                parts.append(
                    _PLACEHOLDER.sub(
                        lambda m: {
                            "catalog": ref.catalog,
                            "namespace": ".".join(ref.namespace),
                            "table": ref.name,
                        }[m.group(1)],
                        part,
                    )
                )
        return parts


# The scheme of this process: set by whoever builds the definitions or runs a command from settings
# (orchestration/project.py, the CLI), read wherever a key is named (ops, sensors, CLI output, links).
# One process serves one code location, hence one scheme.
_current = AssetKeySettings()


def use_asset_keys(scheme: AssetKeySettings) -> None:
    global _current
    _current = scheme


def current_asset_keys() -> AssetKeySettings:
    return _current


def asset_key_path(ref: TableRef) -> list[str]:
    """``ref``'s asset key path under this process's scheme."""
    return _current.path(ref)
