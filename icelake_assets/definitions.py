"""Dagster entry point (workspace.yaml, `dagster dev`): every selected table of the configured
catalogs, with its maintenance, checks and sensors. Settings: $ICELAKE_CONFIG or ./icelake.yaml.
Tables come from the cached inventory when it is fresh (catalog/inventory.py), else from discovery."""

from dagster import Definitions, definitions
from dagster._core.definitions.definitions_load_context import DefinitionsLoadContext, DefinitionsLoadType

from icelake_assets.orchestration.project import load_definitions

# Dagster 1.13's code server calls a @definitions function twice per load (to find the module's
# targets, then to build the repository) and does not keep the result: at 10,000 tables each build
# takes seconds. One build per process and kind of load (a reload starts a new process).
_BUILT: dict[object, Definitions] = {}


@definitions
def defs() -> Definitions:
    # Dagster sets the load context (code server: initialization; run worker: reconstruction).
    context = DefinitionsLoadContext.get()
    key = (context.load_type, repr(sorted(_reconstruction_metadata(context).items())))
    if key not in _BUILT:
        _BUILT[key] = load_definitions(context)
    return _BUILT[key]


def _reconstruction_metadata(context: DefinitionsLoadContext) -> dict[str, object]:
    if context.load_type != DefinitionsLoadType.RECONSTRUCTION:
        return {}  # Dagster refuses access to it during initialization
    return dict(context.reconstruction_metadata)
