"""Root causes of Spark/JVM errors: the last ``Caused by:`` of the Java trace, with its kind."""

from icelake_assets.causes import root_cause

# The shape of a py4j error of a rewrite denied by the file system (its first line says nothing).
PY4J = """An error occurred while calling o59.sql.
: org.apache.spark.SparkException: Job aborted due to stage failure: Task 0 in stage 3.0 failed 1 times
\tat org.apache.spark.scheduler.DAGScheduler.failJobAndIndependentStages(DAGScheduler.scala:2856)
\tat org.apache.spark.scheduler.DAGScheduler.$anonfun$abortStage$2(DAGScheduler.scala:2792)
Caused by: org.apache.iceberg.exceptions.RuntimeIOException: Failed to create file: file:/lake/t/data/0.parquet
\tat org.apache.iceberg.hadoop.HadoopOutputFile.createOrOverwrite(HadoopOutputFile.java:87)
Caused by: java.io.FileNotFoundException: /lake/t/data/0.parquet (Permission denied)
\tat java.base/java.io.FileOutputStream.open0(Native Method)
"""


class FakePy4JError(Exception):
    """Stands in for py4j's Py4JJavaError, whose str() is the JVM's trace (no JVM needed here)."""

    def __str__(self) -> str:
        return PY4J


def test_a_py4j_error_is_reduced_to_its_root_java_exception():
    cause = root_cause(FakePy4JError())
    assert cause.exception == "FileNotFoundException"
    assert cause.message == "/lake/t/data/0.parquet (Permission denied)"
    assert cause.kind == "access_denied" and cause.via == "SparkException"
    assert (
        str(cause) == "FileNotFoundException: /lake/t/data/0.parquet (Permission denied) (in SparkException)"
    )


def test_commit_conflicts_and_python_errors_are_told_apart():
    conflict = Exception(
        "An error occurred while calling o1.sql.\n: org.apache.iceberg.exceptions.CommitFailedException: "
        "Cannot commit: stale metadata"
    )
    assert root_cause(conflict).kind == "commit_conflict"
    assert root_cause(conflict).exception == "CommitFailedException"
    try:
        try:
            raise PermissionError(13, "Permission denied", "/lake/t/metadata")
        except PermissionError as inner:
            raise RuntimeError("listing failed") from inner
    except RuntimeError as outer:
        cause = root_cause(outer)
    assert cause.exception == "PermissionError" and cause.kind == "access_denied"


def test_a_store_catalog_or_driver_that_is_down_is_an_outage_not_the_tables_fault():
    from icelake_assets.causes import root_cause

    for text in (
        "java.net.ConnectException: Connection refused",
        "org.apache.iceberg.exceptions.RESTException: Unable to process: 503 Service Unavailable",
        "org.apache.iceberg.exceptions.NotAuthorizedException: Not authorized: token expired",
        "py4j.protocol.Py4JNetworkError: Answer from Java side is empty",
        # The shared driver killed the moment after a run attached (the chaos soak: a table failure
        # with its 600 s backoff before).
        "java.lang.IllegalStateException: Cannot call methods on a stopped SparkContext.",
        "org.apache.spark.SparkException: Job 19 cancelled because SparkContext was shut down",
        "ResidentDriverKilledError: the resident Spark driver exited while starting (exit -9); driver.log:",
        'java.lang.NullPointerException: Cannot invoke "org.apache.spark.SparkEnv.blockManager()" because '
        'the return value of "org.apache.spark.SparkEnv$.get()" is null',
    ):
        assert root_cause(RuntimeError(text)).kind == "outage", text
    assert root_cause(RuntimeError("java.nio.file.AccessDeniedException: /lake: Permission denied")).kind == (
        "access_denied"
    )
    assert root_cause(ValueError("bad partition value")).kind == "error"
    # A driver that exits by itself while starting (a bad configuration) is not an outage.
    said = "ResidentSparkError: the resident Spark driver exited while starting (exit 1); driver.log:"
    assert root_cause(RuntimeError(said)).kind == "error"


def test_a_driver_killed_while_starting_is_an_outage_one_that_exits_by_itself_is_not():
    from icelake_assets.causes import root_cause
    from icelake_assets.maintenance.resident_spark import ResidentDriverKilledError, ResidentSparkError

    said = "the resident Spark driver exited while starting (exit {}); driver.log:"
    assert root_cause(ResidentDriverKilledError(said.format(-9))).kind == "outage"
    assert root_cause(ResidentSparkError(said.format(1))).kind == "error"
