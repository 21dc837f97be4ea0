"""One maintenance pass over a lake on S3, in a process of its own (test_s3_rest.py runs it).

A live Spark session cannot take new jars or Hadoop options, and other test files share the test
process's session: the S3 session (S3A jars, spark.hadoop.fs.s3a.*) gets its own JVM. Prints one JSON
line: the pre-flight's result and, when it passed, what each procedure returned, the row counts and
what the compute_statistics op did.

    python -m icelake_assets_tests.catalog.s3_spark_job SETTINGS CATALOG NAMESPACE TABLE
"""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime, timedelta

from icelake_assets.catalog.connection import TableRef, load_table, open_catalog
from icelake_assets.health.stats import compute_table_stats
from icelake_assets.maintenance.ops.statistics import compute_statistics
from icelake_assets.maintenance.spark import procedures
from icelake_assets.maintenance.spark.preflight import preflight
from icelake_assets.maintenance.spark.session import spark_config
from icelake_assets.settings import Policy, load_settings


def main(path: str, catalog: str, namespace: str, name: str) -> dict:
    from pyspark.sql import SparkSession

    settings = load_settings(path)
    conf = spark_config(settings)
    builder = SparkSession.builder
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    ref = TableRef(catalog, (namespace,), name)
    table = load_table(open_catalog(settings, catalog), ref)
    before_snapshots = len(table.metadata.snapshots)
    result = preflight(spark, ref, table)
    out: dict = {
        "jars": conf.get("spark.jars", "").split(","),
        "preflight": {
            "ok": result.ok,
            "checked": list(result.checked),
            "problems": [str(p) for p in result.problems],
        },
    }
    if not result.ok:
        table.refresh()
        out["snapshots"] = {"before": before_snapshots, "after": len(table.metadata.snapshots)}
        return out
    files = f"{procedures.table_identifier(ref)}.{procedures.quote_identifier('files')}"
    out["rows_before"] = procedures.count_rows(spark, ref)
    out["files_before"] = spark.table(files).count()
    future = datetime.now(UTC) + timedelta(days=1)
    out["expire_snapshots"] = procedures.expire_snapshots(spark, ref, older_than=future, retain_last=1)
    # Orphans: older_than must be a day old at least (Iceberg refuses younger): a dry run lists them.
    out["remove_orphan_files"] = [
        r.asDict()
        for r in procedures.call_procedure(
            spark, ref, "remove_orphan_files", older_than=datetime.now(UTC) - timedelta(days=2), dry_run=True
        )
    ]
    out["rewrite_data_files"] = procedures.rewrite_data_files(spark, ref, options={"min-input-files": "2"})
    out["rewrite_manifests"] = procedures.rewrite_manifests(spark, ref)
    out["rows_after"] = procedures.count_rows(spark, ref)
    out["files_after"] = spark.table(files).count()
    # The statistics op on the compacted table (issue 39: it failed with a 403 here): the op itself,
    # as a run calls it, with a policy that wants statistics of a table this small.
    policy = Policy.model_validate({"statistics": {"min_rows": 1}})
    table.refresh()
    stats = compute_statistics(lambda: spark, ref, table, policy, lambda t: compute_table_stats(t, policy))
    out["compute_statistics"] = {"acted": stats.acted, "reason": stats.reason, **stats.details()}
    spark.stop()
    return out


if __name__ == "__main__":
    print(json.dumps(main(*sys.argv[1:5]), default=str))
