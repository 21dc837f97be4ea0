"""The decision core: from a table's metadata statistics, its policy and what the sensor remembers,
each concern's health finding and maintenance decision (computed from the same numbers, so they
cannot disagree), the guards' verdict, the table's outcome and its launch priority.

No Dagster and no Spark (import contracts in setup.cfg): the maintenance sensor, the asset checks,
the runner and ``icelake plan`` all ask this package, and only convert its answers.
"""
