"""Execution of maintenance on Spark: session config, Iceberg procedures, planning, validation."""
