"""Root causes of Spark/JVM errors: the last ``Caused by:`` of the Java trace, with its kind (read from
the classes of the whole cause chain; messages only where no class says anything)."""

import base64
from urllib.parse import quote

from icelake_assets.causes import describe, root_cause
from icelake_assets.settings import parse_settings

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
    from icelake_assets.maintenance.spark.resident_spark import ResidentDriverKilledError, ResidentSparkError

    said = "the resident Spark driver exited while starting (exit {}); driver.log:"
    assert root_cause(ResidentDriverKilledError(said.format(-9))).kind == "outage"
    assert root_cause(ResidentSparkError(said.format(1))).kind == "error"


# What Spark gives for a REST catalog answering 401 (Iceberg's Java client, the token refused).
NOT_AUTHORIZED = """An error occurred while calling o45.sql.
: org.apache.iceberg.exceptions.NotAuthorizedException: Not authorized: Credentials have expired
\tat org.apache.iceberg.rest.ErrorHandlers$DefaultErrorHandler.accept(ErrorHandlers.java:212)
\tat org.apache.iceberg.rest.HTTPClient.throwFailure(HTTPClient.java:240)
\tat org.apache.iceberg.rest.RESTSessionCatalog.loadTable(RESTSessionCatalog.java:461)
"""


class FakeCaptured(Exception):
    """Stands in for pyspark's captured exceptions, which keep the JVM trace in ``stackTrace``."""

    def __init__(self, desc: str, trace: str) -> None:
        super().__init__(desc)
        self.stackTrace = trace


def _raised(outer: BaseException, inner: BaseException) -> BaseException:
    """``outer`` raised from ``inner``, as the code wrapping a driver's error does."""
    try:
        try:
            raise inner
        except BaseException as err:
            raise outer from err
    except BaseException as err:
        return err


def test_a_catalog_refusing_the_identity_is_auth_not_an_outage():
    from pyiceberg.exceptions import ForbiddenError, OAuthError, UnauthorizedError

    from icelake_assets.catalog.connection import CatalogUnavailableError, TableUnreadableError

    spark = Exception(NOT_AUTHORIZED)
    assert root_cause(spark).kind == "auth" and root_cause(spark).exception == "NotAuthorizedException"
    captured = FakeCaptured("[INTERNAL_ERROR] loading the table failed", NOT_AUTHORIZED.split("\n", 1)[1][2:])
    assert root_cause(captured).kind == "auth"
    # pyiceberg's REST client, raised for real and wrapped as catalog/connection.py does.
    refused = UnauthorizedError("NotAuthorizedException: Credentials have expired")
    loading = TableUnreadableError("catalog 'lake' failed to load table lake.ns.t: UnauthorizedError: ...")
    assert root_cause(_raised(loading, refused)).kind == "auth"
    listing = CatalogUnavailableError.of("lake", "cannot be listed: ForbiddenError: not allowed")
    assert root_cause(_raised(listing, ForbiddenError("not allowed"))).kind == "auth"
    assert root_cause(_raised(RuntimeError("token"), OAuthError("invalid_client: bad secret"))).kind == "auth"
    for text in (
        "org.apache.iceberg.exceptions.ForbiddenException: Forbidden: principal may not load table ns.t",
        "org.apache.iceberg.exceptions.RESTException: Unable to process: HTTP 401 Unauthorized",
        "org.apache.iceberg.exceptions.BadRequestException: Malformed request: invalid_grant: expired",
    ):
        assert root_cause(RuntimeError(text)).kind == "auth", text
    # The store refusing a file is the data's permissions, not the catalog's credentials.
    for text in (
        "software.amazon.awssdk.services.s3.model.S3Exception: Access Denied (Service: S3, Status Code: 403)",
        "java.nio.file.AccessDeniedException: s3a://lake/t/data/0.parquet: getFileStatus: 403 Forbidden",
        "OSError: When reading information for key 't/x.parquet': AWS Error ACCESS_DENIED during HeadObject",
    ):
        assert root_cause(RuntimeError(text)).kind == "access_denied", text


def test_a_rest_exception_is_an_error_unless_its_status_says_the_catalog_is_down():
    from pyiceberg.exceptions import RESTError, ServerError, ServiceUnavailableError

    rest = "org.apache.iceberg.exceptions.RESTException: Unable to process: {}"
    assert root_cause(RuntimeError(rest.format("Invalid table metadata: missing field"))).kind == "error"
    assert root_cause(RESTError("RESTError 422: Received unexpected JSON Payload")).kind == "error"
    for said in ("Status Code: 503", "<html><title>502 Bad Gateway</title></html>", "504 Gateway Timeout"):
        assert root_cause(RuntimeError(rest.format(said))).kind == "outage", said
    assert root_cause(ServerError("ServerError: RestError: Internal Server Error")).kind == "outage"
    assert root_cause(ServiceUnavailableError("ServiceUnavailableError: down")).kind == "outage"
    # The client's own failure to connect, under Iceberg's catch-all.
    refused = (
        "org.apache.iceberg.exceptions.RESTException: Error occurred while processing GET request\n"
        "Caused by: java.net.ConnectException: Connection refused"
    )
    assert root_cause(RuntimeError(refused)).kind == "outage"


def test_a_validation_exception_is_the_tables_error_unless_a_concurrent_commit_caused_it():
    from pyiceberg.exceptions import ValidationException

    java = "org.apache.iceberg.exceptions.ValidationException: {}"
    dropped = "Cannot find source column for sort field: 1000: identity(4) ASC NULLS FIRST"
    assert root_cause(RuntimeError(java.format(dropped))).kind == "error"
    assert root_cause(RuntimeError(java.format("Conflicting partition fields: ['d', 'd']"))).kind == "error"
    for said in (
        "Found conflicting files that can contain records matching true: [s3://lake/t/data/a.parquet]",
        "Found new conflicting delete files that can apply to records matching true: [d.parquet]",
        "Cannot commit, found new delete for replaced data file: GenericDataFile{...}",
        "Missing required files to delete: s3://warehouse/t/data/a.parquet",
    ):
        assert root_cause(RuntimeError(java.format(said))).kind == "commit_conflict", said
    try:
        raise ValidationException("Data files were concurrently deleted: ['a.parquet']")
    except ValidationException as err:
        assert root_cause(err).kind == "commit_conflict"
    stale = "org.apache.iceberg.exceptions.CommitFailedException: Cannot commit: stale metadata"
    assert root_cause(RuntimeError(stale)).kind == "commit_conflict"
    # A commit whose state is unknown (a 504 to the commit) is reconciled as a commit, not an outage.
    unknown = (
        "org.apache.iceberg.exceptions.CommitStateUnknownException: Service failed: 504: timeout\n"
        "Caused by: org.apache.iceberg.exceptions.ServiceFailureException: Service failed: 504: timeout"
    )
    assert root_cause(RuntimeError(unknown)).kind == "commit_conflict"


def test_timed_out_in_a_message_is_not_an_outage_a_timeout_class_is():
    from requests.exceptions import ReadTimeout

    assert root_cause(ValueError("the partition scan timed out after 30 s")).kind == "error"
    assert root_cause(RuntimeError("java.lang.RuntimeException: job timed out")).kind == "error"
    assert root_cause(TimeoutError("timed out")).kind == "outage"
    assert root_cause(ReadTimeout("HTTPConnectionPool(host='rest', port=8181): Read timed out.")).kind == (
        "outage"
    )
    read = (
        "org.apache.spark.SparkException: Job aborted\n"
        "Caused by: java.net.SocketTimeoutException: Read timed out"
    )
    assert root_cause(RuntimeError(read)).kind == "outage"


def test_the_whole_chain_is_read_by_class():
    import json

    from icelake_assets.catalog.connection import CatalogUnavailableError, TableUnreadableError

    # Raised while handling a refused connection (no ``from``): the context says it.
    try:
        try:
            raise ConnectionRefusedError(111, "Connection refused")
        except OSError:
            raise RuntimeError("listing the table's files failed")  # noqa: B904
    except RuntimeError as err:
        assert root_cause(err).kind == "outage" and root_cause(err).exception == "RuntimeError"
    # ``from None`` says the context does not matter.
    try:
        try:
            raise ConnectionResetError(104, "reset")
        except OSError:
            raise ValueError("bad partition value") from None
    except ValueError as err:
        assert root_cause(err).kind == "error"
    assert root_cause(CatalogUnavailableError.of("lake", "is down: no answer")).kind == "outage"
    # A catalog error by inheritance whose cause is the table's: a truncated metadata.json.
    try:
        json.loads("{")
    except ValueError as bad:
        unreadable = _raised(TableUnreadableError("catalog 'lake' failed to load table lake.ns.t: ..."), bad)
    assert root_cause(unreadable).kind == "error"
    # A class a message quotes (ours wrap as "Type: message").
    assert root_cause(RuntimeError("ResidentDriverKilledError: exited (exit -9)")).kind == "outage"


# What a cause tells goes to run tags, audit records and logs (issue 55): secrets a driver's error
# echoes are redacted as the settings are, whatever the form.
JDBC_TRACE = """An error occurred while calling o12.sql.
: org.apache.spark.SparkException: Job aborted due to stage failure
\tat org.apache.spark.scheduler.DAGScheduler.failJobAndIndependentStages(DAGScheduler.scala:2856)
Caused by: java.sql.SQLException: Connection to jdbc:postgresql://icelake:s3cr3tPW@db:5432/lake refused
\tat org.postgresql.Driver.connect(Driver.java:285)
"""
S3A_TRACE = """An error occurred while calling o7.sql.
: org.apache.spark.SparkException: Job aborted
Caused by: java.nio.file.AccessDeniedException: s3a://bucket/t/data: getFileStatus on s3a://bucket/t/data: \
The AWS Access Key Id AKIAIOSFODNN7EXAMPLE you provided does not exist (fs.s3a.secret.key=wJalrXUtnFEMI/K7MDENG)
"""


class OAuthError(Exception):
    """Stands in for pyiceberg's OAuthError (its message echoes what the token endpoint got)."""


def _told(err: BaseException) -> str:
    """Everything a cause tells of ``err``."""
    cause = root_cause(err)
    return "\n".join((str(cause), cause.message, describe(err)))


def test_a_jdbc_password_and_an_s3a_key_in_a_java_trace_are_not_told():
    jdbc, s3a = Exception(JDBC_TRACE), FakeCaptured("An error occurred while calling o7.sql.", S3A_TRACE)
    told = _told(jdbc) + _told(s3a)
    for secret in ("s3cr3tPW", "AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG"):
        assert secret not in told
    # Still the cause a user acts on, and its kind read from the unredacted trace.
    assert str(root_cause(jdbc)) == (
        "SQLException: Connection to jdbc:postgresql://icelake:***@db:5432/lake refused (in SparkException)"
    )
    assert root_cause(s3a).kind == "access_denied" and "s3a://bucket/t/data" in root_cause(s3a).message


def test_an_oauth_error_echoing_a_client_secret_is_not_told():
    echoed = OAuthError(
        "invalid_client: bad client; request: grant_type=client_credentials&client_id=lake"
        '&client_secret=cl1ent-S3cret&scope=catalog {"client_secret": "cl1ent-S3cret"} '
        "Authorization: Bearer eyJhbGciOi.tok3n"
    )
    wrapped = _raised(RuntimeError("catalog 'lake' cannot be opened"), echoed)
    told = _told(wrapped) + _told(echoed)
    assert "cl1ent-S3cret" not in told and "eyJhbGciOi.tok3n" not in told
    assert root_cause(wrapped).kind == "auth" and "client_id=lake" in describe(wrapped)


def test_a_known_secret_of_the_settings_or_the_environment_is_not_told_in_any_form(tmp_path, monkeypatch):
    # No shape gives these away: only the loaded settings (a ${VAR} under a secret key, the variable's
    # name saying nothing) and the environment's secret-looking variables know them.
    planted, env_only = "Pl@nted/opaque+9f3c", "env-0nly-Secret-x7Q"
    monkeypatch.setenv("LAKE_OPAQUE_7", planted)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", env_only)
    props = {"type": "sql", "uri": "sqlite:///x.db", "s3.secret-access-key": "${LAKE_OPAQUE_7}"}
    parse_settings({"catalogs": {"lake": props}}, "test", tmp_path)
    forms = (planted, quote(planted, safe=""), base64.b64encode(planted.encode()).decode(), env_only)
    err = RuntimeError(f"the store said no to {' and '.join(forms)}")
    told = _told(err) + _told(Exception(f"x\n: java.io.IOException: rejected {planted}\n"))
    assert not [f for f in forms if f in told]
    assert describe(err).startswith("RuntimeError: the store said no to ***")
