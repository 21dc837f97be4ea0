"""Why a Spark/JVM call failed, in one line: the root Java exception and its message.

py4j's errors open with "An error occurred while calling o59.sql." and pyspark's captured ones with
Spark's wrapper; the cause a user can act on ("AccessDeniedException: /lake/t/data: Permission
denied") is the last "Caused by:" of the Java stack trace. The trace is read as text (the JVM may be
dead by the time the error is reported), and a few kinds are told apart because they ask for
different answers: a permission error is not fixed by retrying the same plan.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

CauseKind = Literal["access_denied", "commit_conflict", "not_found", "outage", "error"]

# "java.nio.file.AccessDeniedException: /x" or "Caused by: org.apache...CommitFailedException: msg"
_JAVA_LINE = re.compile(
    r"^(?:Caused by: |: )?((?:[a-z_$][\w$]*\.)+[A-Z][\w$]*(?:Exception|Error|Throwable)[\w$]*)(?:: (.*))?$"
)
_ACCESS = (
    "AccessDenied",
    "Permission denied",
    "Operation not permitted",
    "AccessControlException",
    "403 Forbidden",
    "Forbidden (403)",
)
_CONFLICT = ("CommitFailedException", "CommitStateUnknownException", "ValidationException")
# The store, the catalog or the Spark driver was down or restarting: not the table's fault, retried
# soon instead of after the table's failure backoff (orchestration/runs/model.py).
_OUTAGE = (
    "Connection refused",
    "ConnectException",
    "ConnectionRefusedError",
    "ConnectionResetError",
    "Connection reset",
    "SocketTimeoutException",
    "ConnectTimeoutException",
    "timed out",
    "NoHttpResponseException",
    "Unable to execute HTTP request",
    "ServiceUnavailable",
    "503 Service Unavailable",
    "502 Bad Gateway",
    "504 Gateway Timeout",
    "Status Code: 500",
    "Status Code: 503",
    "InternalServerError",
    "ServerError",
    "RESTException",
    "NotAuthorizedException",  # an expired token after the catalog restarted (Java's REST client)
    "UnauthorizedError",  # the same from pyiceberg's REST client, which refreshes only on expiry
    "AuthorizationExpiredError",
    "token expired",
    "Py4JNetworkError",
    "Answer from Java side is empty",
    "Error while sending or receiving",
    "CatalogUnavailableError",
    # The shared Spark driver was stopped or killed while a run used it (seen in the chaos soak: the
    # run had attached a moment before; the next run starts a new driver).
    "Cannot call methods on a stopped SparkContext",
    "SparkContext was shut down",
    "SparkContext has been shutdown",
    # A run's call landing on a driver whose SparkContext is stopping (the chaos soak: two table
    # failures, past the lake's 10 minutes to heal): Spark's environment is gone.
    'SparkEnv$.get()" is null',
    # The shared driver killed by a signal while it started (the chaos soak: a table failure before).
    "ResidentDriverKilledError",
)
_MAX_MESSAGE = 500


@dataclass(frozen=True)
class Cause:
    """The root of an error: its exception's simple name, message, and kind."""

    exception: str
    message: str
    kind: CauseKind = "error"
    via: str | None = None  # the outermost Java exception, when it is not the root

    def __str__(self) -> str:
        text = f"{self.exception}: {self.message}" if self.message else self.exception
        return f"{text} (in {self.via})" if self.via else text


def _kind(text: str) -> CauseKind:
    if any(k in text for k in _ACCESS):
        return "access_denied"
    if any(k in text for k in _CONFLICT):
        return "commit_conflict"
    if any(k in text for k in _OUTAGE):
        return "outage"
    if "FileNotFoundException" in text or "NoSuchFileException" in text or "NotFoundException" in text:
        return "not_found"
    return "error"


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
    first Java exception line), for Python errors the innermost ``__cause__``."""
    lines = [(m.group(1), (m.group(2) or "").strip()) for m in _matches(_java_trace(err))]
    if lines:
        name, message = lines[-1]
        simple = name.rsplit(".", 1)[-1]
        outer = lines[0][0].rsplit(".", 1)[-1]
        message = message[:_MAX_MESSAGE]
        return Cause(simple, message, _kind(f"{name} {message}"), outer if outer != simple else None)
    inner = err
    while inner.__cause__ is not None and inner.__cause__ is not inner:
        inner = inner.__cause__
    message = (str(inner).strip().splitlines() or [""])[0][:_MAX_MESSAGE]
    name = type(inner).__name__
    return Cause(name, message, _kind(f"{name} {message}"))


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
    first = (str(err).strip().splitlines() or [""])[0][:_MAX_MESSAGE]
    outer = f"{type(err).__name__}: {first}" if first else type(err).__name__
    if err.__cause__ is None or (cause.message and cause.message in outer):
        return outer
    return f"{outer} (caused by {cause})"
