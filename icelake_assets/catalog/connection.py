"""Opening catalogs with pyiceberg and loading tables, with errors that name the cause."""

from __future__ import annotations

from pathlib import Path

from pyiceberg.catalog import Catalog, load_catalog
from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError
from pyiceberg.table import Table

from icelake_assets.settings import (
    REDACTED,
    Settings,
    is_safe_key,
    leaf_items,
    redact_properties,
    uri_secrets,
)
from icelake_assets.types import IcelakeError, TableRef, dagster_name  # noqa: F401  (re-exported)


class CatalogUnavailableError(IcelakeError, RuntimeError):
    """The catalog is configured but cannot be reached or opened."""


class TableMissingError(IcelakeError, LookupError):
    """The table does not exist (any more) in its catalog."""


def _check_reachable(name: str, props: dict[str, str]) -> None:
    uri = props.get("uri", "")
    if props.get("type", "sql") == "sql" and uri.startswith("sqlite:///"):
        # The query is not the path (and may hold a secret).
        path = Path(uri[len("sqlite:///") :].split("?")[0])
        if not path.exists():
            raise CatalogUnavailableError(
                f"catalog {name!r}: SQLite database {path} does not exist "
                "(build the demo lake with `icelake demo-lake`, or fix catalogs." + name + ".uri)"
            )


def open_catalog(settings: Settings, name: str, create: bool = False) -> Catalog:
    """Open catalog ``name`` from settings; ``create`` allows a new SQLite file (demo lake)."""
    props = settings.catalog_properties(name)
    if not create:
        _check_reachable(name, props)
    try:
        return load_catalog(name, **props)
    except Exception as err:  # pyiceberg raises driver-specific errors: name the catalog and the cause
        safe = redact_properties(props)
        raise CatalogUnavailableError(
            f"catalog {name!r} cannot be opened ({safe}): {redact_text(str(err), props)}"
        ) from err


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
        raise CatalogUnavailableError(f"catalog {ref.catalog!r} failed to load table {ref}: {err}") from err


def current_snapshot_id(table: Table) -> int | None:
    """The id of the table's current snapshot (None: a table never written)."""
    snap = table.current_snapshot()
    return snap.snapshot_id if snap else None
