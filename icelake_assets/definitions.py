"""Dagster entry point (workspace.yaml, `dagster dev`): every selected table of the configured
catalogs, with its maintenance, checks and sensors. Settings: $ICELAKE_CONFIG or ./icelake.yaml.
Tables come from the cached inventory when it is fresh (catalog/inventory.py), else from discovery."""

from dagster import Definitions, definitions
from dagster._core.definitions.definitions_load_context import DefinitionsLoadContext

from icelake_assets.orchestration.project import load_definitions


@definitions
def defs() -> Definitions:
    # Dagster sets the load context (code server: initialization; run worker: reconstruction).
    return load_definitions(DefinitionsLoadContext.get())
