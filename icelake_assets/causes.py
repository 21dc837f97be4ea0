"""Why a call failed, in one line (the root exception and its message), and what kind of failure it is.

py4j's errors open with "An error occurred while calling o59.sql." and pyspark's captured ones with
Spark's wrapper; the cause a user can act on ("AccessDeniedException: /lake/t/data: Permission
denied") is the last "Caused by:" of the Java stack trace. The trace is read as text (the JVM may be
dead by the time the error is reported).

The kind decides the answer (orchestration/runs/model.py), so it is read from the whole cause chain,
by exception class: a Python exception's class and bases along ``__cause__``/``__context__``, the Java
classes its trace names (``Caused by:`` lines, the first line; shaded copies count by their simple
name), and class names quoted in a message (ours wrap a driver's error as "Type: message"). A message
is read only when no class of the chain says anything (a RuntimeException "Connection refused", an
HTTP status). When classes disagree the most specific answer wins (``_PRIORITY``): a catalog that is
"unavailable" because it refused our token is an auth failure.

* ``auth``: the *catalog* refused the maintenance identity (REST 401/403/419: Iceberg's
  NotAuthorizedException/ForbiddenException, pyiceberg's UnauthorizedError, ForbiddenError,
  OAuthError; a rejected OAuth client). Its credentials or grants in icelake.yaml/the catalog.
* ``access_denied``: the *store* or file system refused a file (S3 403/AccessDenied, "Permission
  denied", Hadoop's AccessControlException): the data's permissions. Retrying the plan does not help.
* ``commit_conflict``: Iceberg refused the commit for a concurrent one (CommitFailedException,
  CommitStateUnknownException, a ValidationException that says so); other ValidationExceptions (a sort
  column a writer dropped) are the table's ``error``.
* ``outage``: the store, the catalog or the Spark driver was down or restarting (by class: a refused
  connection, a socket timeout, 5xx/429; never a bare "timed out" in a message).
* ``not_found``: a file or table that is gone; ``error``: anything else.

What a cause tells (:func:`root_cause`'s message, :func:`describe`) goes to run tags, audit records and
logs: it is redacted here, once for every sink, as the settings are (settings/redaction.py: their
secret values, the environment's, URI passwords, secret-looking key=value pairs, AWS key ids). The
kind is read from the unredacted text.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Literal

from icelake_assets.settings.redaction import redact_message
from icelake_assets.types import IcelakeError

CauseKind = Literal["access_denied", "auth", "commit_conflict", "not_found", "outage", "error"]
# When the chain says several things, the most specific goes first: a refusal (of a file, of the
# identity) over a commit's fate (a CommitStateUnknownException around a 504 is a commit to reconcile)
# over a missing file over an outage (often only the wrapper's word); "error" when nothing else is said.
_PRIORITY: tuple[CauseKind, ...] = (
    "access_denied",
    "auth",
    "commit_conflict",
    "not_found",
    "outage",
    "error",
)

# "java.nio.file.AccessDeniedException: /x" or "Caused by: org.apache...CommitFailedException: msg"
_JAVA_LINE = re.compile(
    r"^(?:Caused by: |: )?((?:[a-z_$][\w$]*\.)+[A-Z][\w$]*(?:Exception|Error|Throwable)[\w$]*)(?:: (.*))?$"
)
# A class named inside a message ("catalog 'x' cannot be opened: UnauthorizedError: ...").
_NAMED = re.compile(r"(?<![\w$])(?:[a-z_$][\w$]*\.)*([A-Z][\w$]*(?:Exception|Error))\b")
# An HTTP status in a message: AWS's "Status Code: 503", "HTTP 401", pyiceberg's "RESTError 500:",
# a proxy's "<title>502 Bad Gateway</title>" that Iceberg's REST client passes on.
_STATUS = re.compile(
    r"(?:status(?:[ _]?code)?|HTTP(?:/[\d.]+)?|RESTError)[\s:=]*([1-5]\d\d)\b"
    r"|\b([1-5]\d\d) (?:Bad Gateway|Service Unavailable|Gateway Time-?out|Internal Server Error"
    r"|Unauthorized|Forbidden|Too Many Requests)\b|\bForbidden \((403)\)",
    re.IGNORECASE,
)
_ACCESS = (
    "AccessDenied",
    "Access Denied",
    "ACCESS_DENIED",  # pyarrow's S3 errors
    "Permission denied",
    "Operation not permitted",
    "InvalidAccessKeyId",
    "SignatureDoesNotMatch",
)
# Messages of classes that say nothing (RuntimeException, SparkException, py4j's Py4JError...).
_OUTAGE = (
    "Connection refused",
    "Connection reset",
    "Unable to execute HTTP request",  # the AWS SDK's client error around a network failure
    "NETWORK_CONNECTION",  # pyarrow's S3 errors
    "Answer from Java side is empty",
    "Error while sending or receiving",
    "trying to connect to the Java server",
    # The shared Spark driver was stopped or killed while a run used it (seen in the chaos soak: the
    # run had attached a moment before; the next run starts a new driver).
    "Cannot call methods on a stopped SparkContext",
    "SparkContext was shut down",
    "SparkContext has been shutdown",
    # A run's call landing on a driver whose SparkContext is stopping (the chaos soak: two table
    # failures, past the lake's 10 minutes to heal): Spark's environment is gone.
    'SparkEnv$.get()" is null',
)
# What Iceberg (Java and pyiceberg) says when a concurrent commit made the operation invalid; its
# other ValidationExceptions are the table's (a sort or partition column that no longer exists).
_CONFLICT = (
    "Found conflicting",
    "Found new conflicting",
    "Found concurrently added",
    "conflicts with existing partition",
    "Cannot commit, found new",
    "Cannot commit, missing data files",
    "Missing required files to delete",  # a writer deleted them first (the chaos soak)
    "could not be found in the latest snapshot",
    "Cannot determine history between",  # its starting snapshot expired meanwhile
    "were found matching the filter",
    "were concurrently deleted",
)
_MAX_MESSAGE = 500
_MAX_CHAIN = 32

Verdict = CauseKind | None


def _store(message: str) -> Verdict:
    """An object store's service error (S3Exception, botocore's ClientError): by status or error code."""
    if any(k in message for k in _ACCESS):
        return "access_denied"
    if "SlowDown" in message or "ServiceUnavailable" in message or "InternalError" in message:
        return "outage"
    if "NoSuchKey" in message:
        return "not_found"
    return _by_status(message, {401: "auth", 403: "access_denied", 404: "not_found"})


def _catalog(message: str) -> Verdict:
    """Iceberg's catch-all RESTException (pyiceberg's RESTError): an error unless its status says."""
    return _by_status(message, {401: "auth", 403: "auth", 419: "auth", 404: "not_found"}) or "error"


def _bad_request(message: str) -> Verdict:
    # Iceberg's OAuth2 client reports a rejected client or grant as a bad request (RFC 6749 codes).
    oauth = ("invalid_client", "invalid_grant", "unauthorized_client", "invalid_token")
    return "auth" if any(k in message for k in oauth) else "error"


def _missing_file(message: str) -> Verdict:
    # The JVM reports EACCES on open as FileNotFoundException "<path> (Permission denied)".
    return "access_denied" if any(k in message for k in _ACCESS) else "not_found"


# What a class says, by simple name (a Python class: its own name first, then its bases'). None: it
# says nothing of its own, its causes and message do (a TableUnreadableError is a catalog error by
# inheritance, but a truncated metadata.json is the table's). A function reads the class's message.
_CLASSES: dict[str, CauseKind | Callable[[str], Verdict] | None] = {
    # The catalog refused the identity (Iceberg Java, pyiceberg: 401, 403, 419, OAuth).
    **dict.fromkeys(
        (
            "NotAuthorizedException",
            "ForbiddenException",
            "UnauthorizedError",
            "ForbiddenError",
            "OAuthError",
            "AuthorizationExpiredError",
        ),
        "auth",
    ),
    **dict.fromkeys(("AccessDeniedException", "AccessControlException", "PermissionError"), "access_denied"),
    "CommitFailedException": "commit_conflict",
    "CommitStateUnknownException": "commit_conflict",
    "ValidationException": lambda m: "commit_conflict" if any(k in m for k in _CONFLICT) else "error",
    # Spark's row-level DELETE when a writer committed between its scan and its runtime filter
    # (the chaos soak's retention table); other IllegalStateExceptions say it by their message.
    "IllegalStateException": lambda m: "commit_conflict" if "concurrently modified" in m else None,
    "FileNotFoundException": _missing_file,
    "NoSuchFileException": _missing_file,
    **dict.fromkeys(
        (
            "FileNotFoundError",
            "NotFoundException",
            "NoSuchKeyException",
            "NoSuchTableException",
            "NoSuchTableError",
            "NoSuchNamespaceException",
            "NoSuchNamespaceError",
            "TableMissingError",
        ),
        "not_found",
    ),
    **dict.fromkeys(
        (
            # Python: the builtins (ConnectionRefusedError, BrokenPipeError... are ConnectionErrors),
            # requests', urllib3's, botocore's network errors, py4j's lost gateway, pyiceberg's 5xx/429.
            "ConnectionError",
            "TimeoutError",
            "Timeout",
            "gaierror",
            "ProtocolError",
            "NewConnectionError",
            "EndpointConnectionError",
            "ConnectTimeoutError",
            "ReadTimeoutError",
            "ConnectionClosedError",
            "Py4JNetworkError",
            "ServerError",
            "ServiceUnavailableError",
            "TooManyRequestsError",
            "InternalServerError",
            # Ours: a catalog that cannot be reached, a shared driver killed by a signal while it
            # started (the chaos soak: a table failure before).
            "CatalogUnavailableError",
            "ResidentDriverKilledError",
            # Java: the network, Apache HttpClient (shaded in Iceberg's runtime too), Iceberg's REST 5xx.
            "ConnectException",
            "SocketException",
            "SocketTimeoutException",
            "UnknownHostException",
            "NoRouteToHostException",
            "HttpHostConnectException",
            "ConnectTimeoutException",
            "NoHttpResponseException",
            "TimeoutException",
            "ServiceUnavailableException",
            "ServiceFailureException",
        ),
        "outage",
    ),
    "TableUnreadableError": None,
    "RESTException": _catalog,
    "RESTError": _catalog,
    "BadRequestException": _bad_request,
    "BadRequestError": _bad_request,
    **dict.fromkeys(
        ("S3Exception", "AwsServiceException", "AmazonS3Exception", "AmazonServiceException", "ClientError"),
        _store,
    ),
    "SdkClientException": lambda m: "outage" if "Unable to execute HTTP request" in m else None,
}


def _by_status(message: str, kinds: dict[int, CauseKind]) -> Verdict:
    for m in _STATUS.finditer(message):
        code = int(next(g for g in m.groups() if g))
        if code in kinds:
            return kinds[code]
        if code == 429 or (code >= 500 and code != 501):  # throttled, or the server is failing
            return "outage"
    return None


def _class_says(names: list[str], message: str) -> Verdict:
    """What the first known class of ``names`` (most derived first) says of an error."""
    for name in names:
        if name in _CLASSES:
            said = _CLASSES[name]
            return said(message) if callable(said) else said
    return None


def _message_says(message: str) -> Verdict:
    if any(k in message for k in _ACCESS):
        return "access_denied"
    if any(k in message for k in _OUTAGE):
        return "outage"
    return _by_status(message, {401: "auth", 403: "access_denied"})


def _frames(err: BaseException, trace: str) -> Iterator[tuple[list[str], str]]:
    """Every exception of the chain as (class names, message): a Python one, then the Java ones its
    trace names, then its cause (or the exception it was raised while handling)."""
    seen: set[int] = set()
    inner: BaseException | None = err
    while inner is not None and id(inner) not in seen and len(seen) < _MAX_CHAIN:
        if seen:
            trace = _java_trace(inner)
        seen.add(id(inner))
        java = _matches(trace)
        # A Python exception carrying a JVM trace says it through its Java lines, not its text.
        first = "" if java else (trace.strip().splitlines() or [""])[0]
        yield [c.__name__ for c in type(inner).__mro__], first
        for m in java:
            yield [m.group(1).rsplit(".", 1)[-1]], m.group(2) or ""
        inner = inner.__cause__ or (None if inner.__suppress_context__ else inner.__context__)


def _classify(err: BaseException, trace: str) -> CauseKind:
    by_class: set[CauseKind] = set()
    by_message: set[CauseKind] = set()
    for names, message in _frames(err, trace):
        # The frame's own class, and any class its message quotes.
        quoted = (_class_says([n], message) for n in _NAMED.findall(message))
        said = {k for k in (_class_says(names, message), *quoted) if k}
        by_class |= said
        if not said and (from_message := _message_says(message)):
            by_message.add(from_message)
    found = by_class or by_message  # a message counts only where no class of the chain says anything
    return next((k for k in _PRIORITY if k in found), "error")


@dataclass(frozen=True)
class Cause:
    """The root of an error: its exception's simple name, message, and kind (of the whole chain)."""

    exception: str
    message: str
    kind: CauseKind = "error"
    via: str | None = None  # the outermost Java exception, when it is not the root

    def __str__(self) -> str:
        text = f"{self.exception}: {self.message}" if self.message else self.exception
        return f"{text} (in {self.via})" if self.via else text


def _java_trace(err: BaseException) -> str:
    # pyspark's captured exceptions keep the JVM trace apart from their message.
    trace = getattr(err, "stackTrace", None)
    try:
        text = str(err)
    except Exception:  # py4j renders the trace through the gateway, which may be gone
        text = ""
    return f"{text}\n{trace}" if isinstance(trace, str) else text


def root_cause(err: BaseException) -> Cause:
    """The root cause of ``err``: for JVM errors the last ``Caused by:`` of the Java trace (else its
    first Java exception line), for Python errors the innermost ``__cause__``; its kind is what the
    whole chain says (module docstring)."""
    trace = _java_trace(err)
    kind = _classify(err, trace)
    lines = [(m.group(1), (m.group(2) or "").strip()) for m in _matches(trace)]
    if lines:
        name, message = lines[-1]
        simple = name.rsplit(".", 1)[-1]
        outer = lines[0][0].rsplit(".", 1)[-1]
        return Cause(simple, _told(message), kind, outer if outer != simple else None)
    inner = err
    while inner.__cause__ is not None and inner.__cause__ is not inner:
        inner = inner.__cause__
    return Cause(type(inner).__name__, _told(str(inner)), kind)


def _told(message: str) -> str:
    """A message's first line as a cause tells it: redacted, then cut (a cut must not split a secret
    out of the pattern that recognises it)."""
    return redact_message((message.strip().splitlines() or [""])[0])[:_MAX_MESSAGE]


def _matches(trace: str) -> list[re.Match[str]]:
    """The Java exception lines of a trace: the first one, then every ``Caused by:``, in order."""
    found: list[re.Match[str]] = []
    for raw in trace.splitlines():
        line = raw.strip()
        if found and not line.startswith("Caused by: "):
            continue
        m = _JAVA_LINE.match(line)
        if m:
            found.append(m)
    return found


def describe(err: BaseException) -> str:
    """One line for reasons, run failures and audit records: a JVM error's root cause; a Python
    error's own message (ours name the table or catalog at fault), then its root cause if that says
    more."""
    cause = root_cause(err)
    if _matches(_java_trace(err)):
        return str(cause)
    first = _told(str(err))
    outer = f"{type(err).__name__}: {first}" if first else type(err).__name__
    if err.__cause__ is None or (cause.message and cause.message in outer):
        return outer
    return f"{outer} (caused by {cause})"


class RedactedCause(IcelakeError):
    """An error as it may be recorded: the original class's name and its redacted message
    (:func:`describe`) and its traceback (where it was raised: file, line, code; no values), with no
    chain of its own. A Failure raised ``from RedactedCause.of(err)`` keeps the cause for debugging in
    Dagster's event log, which records every exception of a chain with its message (``__cause__``, and
    ``__context__`` unless suppressed), without the secrets ``err``'s chain may carry (a JDBC URL, an
    S3A key, an OAuth response)."""

    @classmethod
    def of(cls, err: BaseException) -> RedactedCause:
        if isinstance(err, RedactedCause):
            return err
        try:
            told = describe(err)
        except Exception:  # a cause that cannot be read (py4j's gateway gone) is told by its class
            told = type(err).__name__
        stand_in = cls(told).with_traceback(err.__traceback__)
        stand_in.__cause__ = stand_in.__context__ = None
        stand_in.__suppress_context__ = True
        return stand_in
