"""What more than one room of bench/ uses: the final check of a benchmark's own results (report.py),
a cached lake copied for a run (lake_copy.py) and the Dagster instance's PostgreSQL (postgres.py: the
chaos soak's storage and fleet_bench's ``--storage postgres``) and a maintenance-sensor tick with
the runs it asks for, in process (sensor_runs.py). Nothing here measures; nothing here
imports a room."""
