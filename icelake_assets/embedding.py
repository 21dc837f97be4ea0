"""The product inside a user's own Dagster project: a factory and a Dagster Component.

Either way the project gets, for the tables its icelake.yaml selects, the health checks, the
maintenance jobs, the sensors, the schedules and the lake overview, with nothing that clashes with
what the project already has:

* resource keys ``icelake``, ``icelake_spark`` and ``icelake_run_state_io_manager`` (never
  ``pyspark`` or ``io_manager``); jobs, sensors and schedules named ``icelake_*``;
* no executor: the product's own jobs run in process, the project's keep the project's executor;
* the checks job selects the product's checks only;
* the product's concurrency pools (``icelake/maintain_NNN``) get their own limit of one from the
  maintenance sensor, whatever the deployment's ``concurrency.pools`` say of other pools, and a
  maintenance run refuses to start on a table another run is maintaining (docs/embedding.md);
* asset keys from ``asset_keys`` (prefix, template), so the tables land on the keys the project uses.

Python (one Definitions at module scope, or a ``@dg.definitions`` function; a relative path is read
beside the module that calls the factory)::

    from icelake_assets.embedding import icelake_definitions


    @dg.definitions
    def defs():
        return dg.Definitions.merge(dg.Definitions(assets=[orders]), icelake_definitions("icelake.yaml"))

A Component (``defs/icelake/defs.yaml``, written with a starter icelake.yaml by
``dg scaffold defs icelake_assets.embedding.IcelakeComponent icelake``: scaffold.py)::

    type: icelake_assets.embedding.IcelakeComponent
    attributes:
      config: icelake.yaml          # relative to this defs.yaml
      asset_key_template: "{namespace}/{table}"
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from dagster import Definitions
from dagster.components import Component, ComponentLoadContext, Model, Resolvable, scaffold_with

from icelake_assets.scaffold import IcelakeScaffolder
from icelake_assets.settings import Settings, load_settings

__all__ = ["IcelakeComponent", "icelake_definitions"]


def icelake_definitions(
    config: str | os.PathLike[str] | Settings,
    *,
    asset_key_prefix: tuple[str, ...] | list[str] | None = None,
    asset_key_template: str | None = None,
    tables_defined_by_project: bool | None = None,
) -> Definitions:
    """The product's Definitions for a user's project, from ``config`` (an icelake.yaml path, or
    loaded Settings). A relative path is read beside the module that calls this function (as the
    Component reads its ``config`` beside its defs.yaml), not from the working directory, which
    differs between `dg`, `dagster dev` and a run worker; without a calling file (a REPL), from the
    working directory. ``asset_key_prefix`` / ``asset_key_template`` / ``tables_defined_by_project``
    override ``asset_keys`` of the settings (the CLI reads only the file: put them there if you use
    ``icelake plan`` or ``approve``). With ``tables_defined_by_project`` the project's own code
    defines the tables' assets under those keys: the product attaches its checks to them and
    maintains them with jobs that record observations, never materializations."""
    # Here, not at the top: `dg list components` and `dg scaffold defs` import this module (the
    # registry entry point), and the definitions' code (pyiceberg, pyarrow) costs them 2 s.
    # The demo registers its lineage assets (demo/__init__.py), as for the stand-alone code location.
    import icelake_assets.demo  # noqa: F401
    from icelake_assets.orchestration.project import build_definitions
    from icelake_assets.orchestration.sensors.recovery import build_recovery_sensor

    if isinstance(config, Settings):
        settings = config
    else:
        path = Path(config)
        caller = sys._getframe(1).f_globals.get("__file__")
        if not path.is_absolute() and caller:
            path = Path(caller).resolve().parent / path
        settings = load_settings(path.resolve())
    keys = settings.asset_keys
    overrides = {
        name: value
        for name, value in (
            ("prefix", tuple(asset_key_prefix) if asset_key_prefix is not None else None),
            ("template", asset_key_template),
            ("defined_by_project", tables_defined_by_project),
        )
        if value is not None
    }
    if overrides:
        keys = type(keys).model_validate({**keys.model_dump(), **overrides})
        settings = settings.model_copy(update={"asset_keys": keys})
    # A user's workspace has no recovery location of the product's: the recovery sensor comes along.
    return Definitions.merge(
        build_definitions(settings, standalone=False), Definitions(sensors=[build_recovery_sensor()])
    )


@scaffold_with(IcelakeScaffolder)
class IcelakeComponent(Component, Resolvable, Model):
    """Health checks and self-maintenance of the Iceberg tables an icelake.yaml selects.

    ``config``: the icelake.yaml (catalogs, tables, policies), relative to this component's folder;
    ``asset_key_prefix`` and ``asset_key_template`` (``{catalog}``, ``{namespace}``, ``{table}``):
    the tables' asset keys, e.g. ``{namespace}/{table}`` for dagster-iceberg's convention;
    ``tables_defined_by_project``: the project's own assets are the tables (under those keys)."""

    config: str = "icelake.yaml"
    asset_key_prefix: list[str] | None = None
    asset_key_template: str | None = None
    tables_defined_by_project: bool | None = None

    def build_defs(self, context: ComponentLoadContext) -> Definitions:
        path = Path(self.config)
        if not path.is_absolute():
            # The component's folder: context.path is the folder of a defs.yaml, a component.py itself.
            folder = context.path if context.path.is_dir() else context.path.parent
            path = folder / path
        return icelake_definitions(
            path,
            asset_key_prefix=self.asset_key_prefix,
            asset_key_template=self.asset_key_template,
            tables_defined_by_project=self.tables_defined_by_project,
        )
