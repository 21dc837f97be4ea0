"""Dagster entry point (workspace.yaml, `dagster dev`): every selected table of the configured
catalogs, with its maintenance, checks and sensors. Settings: $ICELAKE_CONFIG or ./icelake.yaml."""

from icelake_assets.orchestration.project import build_definitions

defs = build_definitions()
