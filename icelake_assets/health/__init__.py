"""Metadata intelligence: pure functions over pyiceberg metadata. No Spark and no Dagster here."""
