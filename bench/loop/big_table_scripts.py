"""The big-table benchmark's child scripts (bench/loop/big_table_bench.py), each run in a fresh
process by loop_bench's ``timed_script``: WRITE builds the table with Spark, PRODUCT runs the
product's maintenance through Dagster with timers around a few of its functions (observation only),
RAW calls Iceberg's procedures in one SparkSession."""

# Spark writes the table in its own process: the benchmark's process never holds a JVM (or the lock a
# JdbcCatalog keeps on the SQLite file) while trials run.
WRITE = """
import sys
from icelake_assets.catalog.connection import TableRef, open_catalog
from icelake_assets.demo.many_files import write_many_files
from icelake_assets.maintenance.spark.session import spark_config
from icelake_assets.orchestration.resources import IcebergSparkResource
from icelake_assets.settings import load_settings
settings = load_settings(sys.argv[1])
open_catalog(settings, "bench", create=True).create_namespace("ns")
spark = IcebergSparkResource(spark_config=spark_config(settings)).spark_session
write_many_files(spark, TableRef("bench", ("ns",), "many"), int(sys.argv[2]), int(sys.argv[3]))
"""
PRODUCT = """
import json, sys, time
from dagster import DagsterInstance
from icelake_assets.maintenance.verify import post_run
from icelake_assets.maintenance.spark import procedures
from icelake_assets.maintenance.ops import rewrite
from icelake_assets.orchestration import resources
from icelake_assets.orchestration.assets import ops as maintenance_ops
from icelake_assets.orchestration.assets import validation as run_validation
from icelake_assets.orchestration.project import build_definitions, execute_maintenance
from icelake_assets.settings import load_settings
marks, spans = {"imported": time.time()}, []

def timer(owner, attr, label):
    # Observation only: the call runs unchanged, its start and end are kept for the breakdown.
    fn = getattr(owner, attr)
    def timed(*args, **kwargs):
        started = time.time()
        try:
            return fn(*args, **kwargs)
        finally:
            spans.append([label(args) if callable(label) else label, started, time.time()])
    setattr(owner, attr, timed)

timer(resources.IcebergSparkResource, "_init_session", "Spark session start (JVM)")
timer(resources, "preflight", "pre-flight")
timer(procedures, "call_procedure", lambda args: "CALL " + args[2])
timer(resources.IcelakeResource, "stats", "table stats (pyiceberg)")
timer(rewrite, "_measure", "measure what committed")
timer(resources.IcelakeResource, "scan_orphans", "orphan scan (storage listing)")
timer(post_run, "validate_row_counts", "row counts")
timer(post_run, "cross_engine_check", "cross-engine proof")
timer(post_run, "measure_scan_cost", "scan cost before/after")
timer(post_run, "probe_scan", "scan probe (Spark)")
timer(run_validation, "table_health", "health evaluation")
timer(run_validation, "write_run_audit", "audit write")
for module in (maintenance_ops, run_validation):
    timer(module, "load_table_of_run", "catalog load")
defs = build_definitions(load_settings(sys.argv[1]))
marks["defined"] = time.time()
instance = DagsterInstance.ephemeral()
results = execute_maintenance(defs, instance)
marks["executed"] = time.time()
events = [
    [e.dagster_event_type.value if e.dagster_event_type else "LOG", e.step_key, e.timestamp, e.user_message]
    for r in results
    for e in instance.all_logs(r.run_id)
]
with open(sys.argv[2], "w") as out:
    json.dump({"marks": marks, "spans": spans, "events": events}, out, default=str)
sys.exit(0 if all(r.success for r in results) else 1)
"""
RAW = """
import json, sys, time
from pyspark.sql import SparkSession
from icelake_assets.maintenance.spark.session import spark_config
from icelake_assets.partitions.quoting import quote_identifier, sql_string
from icelake_assets.settings import load_settings
marks = {"imported": time.time()}
call = json.loads(sys.argv[2])
builder = SparkSession.builder
for k, v in spark_config(load_settings(sys.argv[1])).items():
    builder = builder.config(k, v)
spark = builder.getOrCreate()
marks["session"] = time.time()
# CALL takes literals only: the catalog quoted as an identifier, everything else as string literals.
catalog, table = quote_identifier(call["catalog"]), sql_string(call["table"])
options = ", ".join(f"{sql_string(k)}, {sql_string(v)}" for k, v in call["options"].items())
where = f", where => {sql_string(call['where'])}" if call["where"] else ""
rows = spark.sql(f"CALL {catalog}.system.rewrite_data_files(table => {table}, strategy => 'binpack', "
                 f"options => map({options}){where})").collect()
marks["rewrite_data_files"] = time.time()
rows += spark.sql(f"CALL {catalog}.system.rewrite_manifests(table => {table})").collect()
marks["rewrite_manifests"] = time.time()
with open(sys.argv[3], "w") as out:
    json.dump({"marks": marks, "rows": [r.asDict() for r in rows]}, out, default=str)
"""
