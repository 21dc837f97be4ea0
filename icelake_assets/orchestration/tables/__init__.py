"""The tables as Dagster sees them: grouped by concurrency pool, one maintenance graph and check op per
group (table_groups.py), and their Iceberg partitions as Dagster partitions (partitions.py)."""
