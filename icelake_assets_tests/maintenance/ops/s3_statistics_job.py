"""The compute_statistics op on a lake on S3, in a process of its own (test_statistics_s3.py runs it).

The S3 session (S3A jars, spark.hadoop.fs.s3a.*) needs a JVM of its own, as s3_spark_job.py's: a live
session takes no new jars. Spark's options come from ``spark_config(settings)`` alone. Prints one JSON
line: the op's result as the audit records it.

    python -m icelake_assets_tests.maintenance.ops.s3_statistics_job SETTINGS CATALOG NAMESPACE TABLE
"""

from __future__ import annotations

import json
import sys

from icelake_assets.catalog.connection import TableRef, load_table, open_catalog
from icelake_assets.health.stats import compute_table_stats
from icelake_assets.maintenance.ops.statistics import compute_statistics
from icelake_assets.maintenance.spark.session import spark_config
from icelake_assets.settings import Policy, load_settings


def main(path: str, catalog: str, namespace: str, name: str) -> dict:
    from pyspark.sql import SparkSession

    settings = load_settings(path)
    builder = SparkSession.builder
    for key, value in spark_config(settings).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    ref = TableRef(catalog, (namespace,), name)
    table = load_table(open_catalog(settings, catalog), ref)
    policy = Policy()
    result = compute_statistics(lambda: spark, ref, table, policy, lambda t: compute_table_stats(t, policy))
    spark.stop()
    return {"acted": result.acted, "reason": result.reason, **result.details()}


if __name__ == "__main__":
    print(json.dumps(main(*sys.argv[1:5]), default=str))
