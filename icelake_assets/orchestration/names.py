"""Dagster names for Iceberg tables: Iceberg allows any string as a name (``o'brien``, ``café``,
``my-table`` next to ``my_table``), Dagster's op, input and output names only ``[A-Za-z0-9_]+``.

Asset keys keep the exact Iceberg names; everything Dagster names is built from
:attr:`~icelake_assets.catalog.connection.TableRef.safe_name` (a readable prefix plus a hash), never
derived from the key (which Dagster's decorators do by default, and which fails or collides)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import cache

from dagster import AssetChecksDefinition, AssetCheckSpec, AssetKey, In, Nothing, Out, op

from icelake_assets.catalog.connection import TableRef
from icelake_assets.settings.asset_keys import AssetKeySettings, current_asset_keys


def table_asset_key(ref: TableRef) -> AssetKey:
    """The asset key of a table: by default its exact Iceberg name (catalog, namespace levels,
    table); ``asset_keys`` in the settings may prefix it or template it (settings/asset_keys.py)."""
    return _asset_key(current_asset_keys(), ref)


@cache  # asked for ten times per table when the definitions are built
def _asset_key(scheme: AssetKeySettings, ref: TableRef) -> AssetKey:
    return AssetKey(scheme.path(ref))


def named_checks(
    name: str, specs: Sequence[AssetCheckSpec], *, description: str | None = None, can_subset: bool = False
) -> Callable[[Callable], AssetChecksDefinition]:
    """``@multi_asset_check`` with every Dagster name chosen here: the op is ``name``, its input
    and outputs are positional. (``@multi_asset_check`` and ``@asset_check`` name them after the
    asset key.) The decorated function yields ``AssetCheckResult``s, as for ``@multi_asset_check``."""
    keys = list(dict.fromkeys(s.asset_key for s in specs))
    # One In / Out object for all (they are immutable): a group's check op has tens of thousands.
    nothing_in, check_out = In(Nothing), Out(None, is_required=not can_subset)
    ins = {f"asset_{i}": nothing_in for i in range(len(keys))}
    outs = {f"check_{i}": check_out for i in range(len(specs))}

    def decorate(fn: Callable) -> AssetChecksDefinition:
        node = op(name=name, ins=ins, out=outs, description=description)(fn)
        return AssetChecksDefinition.create(
            keys_by_input_name=dict(zip(ins, keys, strict=False)),
            node_def=node,
            check_specs_by_output_name=dict(zip(outs, specs, strict=False)),
            can_subset=can_subset,
        )

    return decorate
