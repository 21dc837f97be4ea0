"""Dagster factories: tables become assets, checks, sensors, partitions and jobs. Nothing here
computes health itself: it calls icelake_assets.health and icelake_assets.maintenance."""
