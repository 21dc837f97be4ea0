"""Failures of a tool call as ``icelake.error/v1``: the kind of cause an agent can act on (an unknown
table, a catalog that is down, a guard that refused, a bad argument), the message naming it, and
for a refusal the guard. Never a traceback; an unexpected error says its type and message only."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from icelake_assets.agents.spending import GuardRefused
from icelake_assets.catalog.connection import CatalogUnavailableError, TableMissingError
from icelake_assets.operate.approve import ApprovalError, NotAwaitingApproval
from icelake_assets.settings import Settings, SettingsError, is_safe_key, leaf_items, uri_secrets
from icelake_assets.types import IcelakeError

ERROR_SCHEMA = "icelake.error/v1"


def _kind(err: BaseException) -> tuple[str, str | None]:
    """(kind, guard) of an error, the SDK's wrapper unwrapped to the tool's own exception."""
    kind = getattr(err, "kind", None)
    if isinstance(kind, str):
        return kind, None
    if isinstance(err, GuardRefused):
        return "refused", err.guard
    if isinstance(err, NotAwaitingApproval):
        return "refused", "plan"
    if isinstance(err, TableMissingError):
        return "unknown_table", None
    if isinstance(err, CatalogUnavailableError):
        return "catalog_unavailable", None
    if isinstance(err, ApprovalError):
        return "dagster_unavailable", None
    if isinstance(err, SettingsError | ValueError | ValidationError | LookupError):
        return "bad_argument", None
    if isinstance(err, IcelakeError):
        return "error", None
    return "internal", None


def error_body(tool: str, err: BaseException) -> dict[str, Any]:
    cause = err
    while cause.__cause__ is not None and type(cause).__module__.startswith("mcp"):
        cause = cause.__cause__  # the SDK wraps what the tool raised: name the tool's own error
    kind, guard = _kind(cause)
    message = str(cause).strip() or type(cause).__name__
    if kind == "internal":
        message = f"{type(cause).__name__}: {message}"
    return {
        "schema": ERROR_SCHEMA,
        "error": {"kind": kind, "tool": tool, "message": message[:2000], "guard": guard},
    }


def secret_values(settings: Settings) -> tuple[str, ...]:
    """Every value of the settings that is a secret (catalog and Spark properties not known to be
    safe, agents' tokens, the Spark cluster's secret), longest first: results and audit records show them as ***."""
    found: list[str] = []
    for name in settings.catalogs:
        props = settings.catalog_properties(name)
        for path, value in leaf_items(props):
            text = str(value)
            found += uri_secrets(text) if is_safe_key(str(path[-1])) else [text]
    found += [v for k, v in settings.spark.config.items() if not is_safe_key(k)]
    found += [a.token for a in settings.agents.values() if a.token]
    found += [settings.spark.auth_secret] if settings.spark.auth_secret else []
    return tuple(sorted({v for v in found if len(v) >= 6}, key=len, reverse=True))
