"""Opening catalogs with pyiceberg and loading tables, with errors that name the cause."""

from __future__ import annotations

import re
from pathlib import Path

from pyiceberg.catalog import Catalog, load_catalog
from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError
from pyiceberg.table import Table

from icelake_assets.settings import (
    REDACTED,
    Settings,
    is_safe_key,
    leaf_items,
    redact_message,
    redact_value,
    uri_secrets,
)
from icelake_assets.types import IcelakeError, TableRef, dagster_name  # noqa: F401  (re-exported)


class CatalogUnavailableError(IcelakeError, RuntimeError):
    """The catalog is configured but cannot be reached, opened or listed. ``catalog`` and ``cause``
    (what follows the catalog's name: one line, secrets redacted) let a report name the catalog once."""

    def __init__(self, message: str, *, catalog: str | None = None, cause: str | None = None) -> None:
        super().__init__(message)
        self.catalog = catalog
        self.cause = cause if cause is not None else message

    @classmethod
    def of(cls, catalog: str, cause: str) -> CatalogUnavailableError:
        """``catalog 'name' <cause>``, e.g. cause ``cannot be opened: OperationalError: ...``."""
        return cls(f"catalog {catalog!r} {cause}", catalog=catalog, cause=cause)


class TableUnreadableError(CatalogUnavailableError):
    """The catalog answers but the table's metadata cannot be read (truncated metadata.json, storage
    that refuses it). A CatalogUnavailableError still, for callers that treat both alike."""


class TableMissingError(IcelakeError, LookupError):
    """The table does not exist (any more) in its catalog."""


def _check_reachable(name: str, props: dict[str, str]) -> None:
    uri = props.get("uri", "")
    if props.get("type", "sql") == "sql" and uri.startswith("sqlite:///"):
        # The query is not the path (and may hold a secret).
        path = Path(uri[len("sqlite:///") :].split("?")[0])
        if not path.exists():
            raise CatalogUnavailableError.of(
                name,
                f"is down: SQLite database {path} does not exist "
                f"(build the demo lake with `icelake demo-lake`, or fix catalogs.{name}.uri)",
            )


def open_catalog(settings: Settings, name: str, create: bool = False) -> Catalog:
    """Open catalog ``name`` from settings; ``create`` allows a new SQLite file (demo lake)."""
    props = settings.catalog_properties(name)
    if not create:
        _check_reachable(name, props)
    try:
        return load_catalog(name, **props)
    except Exception as err:  # pyiceberg raises driver-specific errors: name the catalog and the cause
        # The cause first (a UI cell may cut the end), then where the catalog was looked for.
        uri = f" (uri {redact_value('uri', props['uri'])})" if props.get("uri") else ""
        raise CatalogUnavailableError.of(name, f"cannot be opened: {error_text(err, props)}{uri}") from err


# Help links SQLAlchemy and pydantic append, and pydantic's echo of the input (a file's content).
_NOISE = re.compile(r"^\(Background on this error at: .*\)$|^For further information visit \S+$")
_INPUT_ECHO = re.compile(r"\s*\[type=[^\]]*?, input_value=.*$")


def error_text(err: BaseException, props: dict[str, str], limit: int = 600) -> str:
    """A driver's or pyiceberg's error as one line for a report: its type and message (multi-line
    messages joined, help links and echoed input dropped), secrets of ``props`` redacted, and every
    other secret the product knows or can tell by its shape (settings/redaction.py redact_message)."""
    lines = [_INPUT_ECHO.sub("", line).strip() for line in str(err).splitlines()]
    message = " ".join(line for line in lines if line and not _NOISE.match(line))
    text = f"{type(err).__name__}: {message}" if message else type(err).__name__
    text = redact_message(redact_text(text, props))
    return text if len(text) <= limit else text[: limit - 1] + "…"


def redact_text(text: str, props: dict[str, str]) -> str:
    """Driver errors may echo a URL or a credential: replace every value that is not known to be safe
    (and every URI password and query value) by ***, longest first."""
    leaves = leaf_items(props)  # nested properties (auth.oauth2.client_secret) by their own key
    secrets = {str(v) for path, v in leaves if not is_safe_key(path[-1]) and str(v)}
    secrets |= {s for _, v in leaves for s in uri_secrets(str(v))}
    for secret in sorted(secrets, key=len, reverse=True):
        if len(secret) >= 4:  # shorter values (true, 1, ...) would garble the message, not hide a secret
            text = text.replace(secret, REDACTED)
    return text


def load_table(catalog: Catalog, ref: TableRef) -> Table:
    try:
        return catalog.load_table(ref.identifier)
    except (NoSuchTableError, NoSuchNamespaceError) as err:
        raise TableMissingError(f"table {ref} does not exist in catalog {ref.catalog!r}: {err}") from None
    except Exception as err:
        cause = error_text(err, dict(catalog.properties))
        raise TableUnreadableError(
            f"catalog {ref.catalog!r} failed to load table {ref}: {cause}", catalog=ref.catalog, cause=cause
        ) from err


def table_ref(table: Table) -> TableRef:
    """The TableRef of a loaded pyiceberg table: its catalog's name plus its identifier."""
    if not isinstance(table, Table):
        raise TypeError(f"table_ref takes a loaded pyiceberg Table, not {type(table).__name__}")
    ident = tuple(table.name())
    return TableRef(table.catalog.name, ident[:-1], ident[-1])


def current_snapshot_id(table: Table) -> int | None:
    """The id of the table's current snapshot (None: a table never written)."""
    snap = table.current_snapshot()
    return snap.snapshot_id if snap else None
