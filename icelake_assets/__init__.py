"""icelake_assets: a self-maintaining Apache Iceberg lakehouse as a Dagster asset project."""
