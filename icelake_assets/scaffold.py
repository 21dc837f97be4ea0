"""What `dg scaffold defs icelake_assets.embedding.IcelakeComponent NAME` writes: a defs.yaml with the
Component's documented attributes and a commented starter icelake.yaml beside it, so that `dg check
defs` passes right after scaffolding (docs/embedding.md).

The starter's catalog is a local SQLite catalog in the project's ``.lake/`` folder, named ``demo`` so
that `icelake --config <its icelake.yaml> demo-lake` fills it with the demo tables; until then the
product loads with no table and says why. Scaffold parameters replace it with the user's catalog::

    dg scaffold defs icelake_assets.embedding.IcelakeComponent icelake \\
        --catalog lake --catalog-properties '{"type": "rest", "uri": "https://catalog.example.com/api"}'
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

import yaml
from dagster.components import Scaffolder, ScaffoldRequest
from pydantic import BaseModel, Field

from icelake_assets.settings import dotted, literal_secrets

SETTINGS_FILE = "icelake.yaml"
STARTER_CATALOG = "demo"


class IcelakeScaffoldParams(BaseModel):
    """`dg scaffold defs` options (``--catalog``, ``--catalog-properties`` as JSON, ``--mode``)."""

    catalog: str = Field(STARTER_CATALOG, description="the catalog's name (Spark's too)")
    catalog_properties: dict[str, Any] | None = Field(
        None,
        description="pyiceberg catalog properties (secrets as ${VAR}); default: a local SQLite catalog",
    )
    mode: Literal["observe", "propose", "enforce"] = Field(
        "propose", description="observe: checks only; propose: record what it would do; enforce: act"
    )


DEFS_YAML = """\
type: {type_name}

attributes:
  config: {settings}                          # the product's settings, relative to this file
  # asset_key_prefix: [lake]                    # parts before every table's asset key
  # asset_key_template: "{{namespace}}/{{table}}"   # {{catalog}}, {{namespace}}, {{table}} (default {{catalog}}/{{namespace}}/{{table}})
  # tables_defined_by_project: true             # your own assets are the tables: the product adds its checks to them
"""

COMPONENT_PY = """\
import dagster as dg

from {module} import {name}


@dg.component_instance
def load(context: dg.ComponentLoadContext) -> {name}:
    # A relative config is read from this component's folder.
    return {name}(config="{settings}")
"""

HEADER = """\
# icelake_assets settings of this project's {name} Component (defs.yaml beside this file); every
# key is in icelake_assets' docs/settings.md. Relative paths are relative to this file; secrets are
# never written here literally but as ${{VAR}}, read from the environment.
"""

STARTER = """\
#
# To start, a local SQLite catalog in the project's .lake/ folder: it holds no table (and the project
# loads saying so) until you create tables there{fill}
# Replace it with your own catalog (pyiceberg properties), e.g. a REST catalog over S3:
#   lake:
#     type: rest
#     uri: https://catalog.example.com/api
#     warehouse: s3://warehouse/
#     auth: {{type: oauth2, oauth2: {{client_id: ${{LAKE_ID}}, client_secret: ${{LAKE_SECRET}}, token_url: https://catalog.example.com/api/v1/oauth/tokens}}}}
#     s3.region: eu-west-1
catalogs:
  {catalog}:
    type: sql
    uri: sqlite:///{lake}/catalog.db
    warehouse: {lake}/warehouse
"""

POLICIES = """
# tables:
#   include: ["{catalog}.sales.*"]     # fnmatch patterns over catalog.namespace.table (default: all)
policies:
  catalogs:
    # propose (the default): the maintenance sensor records what it would do and why, and launches
    # nothing; observe: health checks only; enforce: it maintains the tables, every action guarded
    # (writers quiet, cost cap, pre-flight, validation with rollback) and audited.
    {catalog}: {{mode: {mode}}}
# spark:                               # where maintenance runs (the health checks need no Spark)
#   master: local[2]                   # or your cluster's master URL
"""


class IcelakeScaffolder(Scaffolder[IcelakeScaffoldParams]):
    """Writes the Component's defs.yaml (or component.py with ``--format python``) and a starter
    icelake.yaml beside it; an existing icelake.yaml there is left as it is."""

    @classmethod
    def get_scaffold_params(cls) -> type[IcelakeScaffoldParams]:
        return IcelakeScaffoldParams

    def scaffold(self, request: ScaffoldRequest[IcelakeScaffoldParams]) -> None:
        params = request.params
        # With append, target_path is the defs.yaml to add a document to; else the new folder.
        folder = request.target_path.parent if request.append else request.target_path
        settings = folder / SETTINGS_FILE
        # Not a validator of the parameters: dg would print the refused value back with the error.
        found = literal_secrets({"catalogs": {params.catalog: params.catalog_properties or {}}})
        if found:
            if not request.append and not any(folder.iterdir()):
                folder.rmdir()  # the folder dg made for this scaffold, left empty
            raise ValueError(
                f"{', '.join(dotted(path) for path in found)}: a literal secret is not written to the "
                "project's files; pass ${ENV_VAR} and export the variable"
            )
        text = settings_text(params, folder, request.project_root, folder.name)
        module, _, name = request.type_name.rpartition(".")
        if request.scaffold_format == "python":
            (folder / "component.py").write_text(
                COMPONENT_PY.format(module=module, name=name, settings=SETTINGS_FILE)
            )
        else:
            document = DEFS_YAML.format(type_name=request.type_name, settings=SETTINGS_FILE)
            if request.append:
                with request.target_path.open("a") as f:
                    f.write("---\n" + document)
            else:
                (folder / "defs.yaml").write_text(document)
        if not settings.exists():
            settings.write_text(text)


def settings_text(params: IcelakeScaffoldParams, folder: Path, project_root: Path | None, name: str) -> str:
    """The icelake.yaml for ``params`` in ``folder``: the starter catalog, or the given one."""
    if params.catalog_properties is not None:
        catalog = yaml.safe_dump(
            {"catalogs": {params.catalog: params.catalog_properties}}, sort_keys=False, width=1000
        )
    else:
        root = project_root or folder
        shown = Path(os.path.relpath(folder / SETTINGS_FILE, root)).as_posix()
        # `icelake demo-lake` builds its tables in the catalog named demo.
        fill = (
            f", or fill it with the product's degraded demo tables:\n#     icelake --config {shown} demo-lake --scale test"
            if params.catalog == STARTER_CATALOG
            else "."
        )
        catalog = STARTER.format(
            catalog=params.catalog,
            fill=fill,
            lake=Path(os.path.relpath(root / ".lake", folder)).as_posix(),
        )
    return HEADER.format(name=name) + catalog + POLICIES.format(catalog=params.catalog, mode=params.mode)
