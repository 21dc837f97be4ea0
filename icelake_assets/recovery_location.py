"""A code location holding only the recovery sensor (workspace.yaml): it loads without settings,
catalogs or tables, so dead runs are failed and their pools freed even while the lake's own code
location fails to load (orchestration/sensors/recovery.py)."""

from dagster import Definitions

from icelake_assets.orchestration.sensors.recovery import build_recovery_sensor

defs = Definitions(sensors=[build_recovery_sensor()])
