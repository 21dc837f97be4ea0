"""The loop's triggers: the maintenance sensor (maintenance.py) with its run requests and audit
records (events.py) and its cursor, the health sensor, schedules, and the loop's own state for the
metrics."""
