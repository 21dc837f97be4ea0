"""Opening catalogs with pyiceberg and loading tables, with errors that name the cause."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pyiceberg.catalog import Catalog, load_catalog
from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError
from pyiceberg.table import Table

from icelake_assets.settings import REDACTED, Settings, is_safe_key, redact_properties, uri_secrets

# Iceberg allows any string as a name part; only empty parts and control characters are refused
# (a name is split on '.', and control characters would corrupt logs and metric labels).
_NAME_PART = re.compile(r"^[^\x00-\x1f\x7f]+$")
_UNSAFE_RUN = re.compile(r"[^A-Za-z0-9_]+")
_READABLE_MAX = 64


def dagster_name(parts: Sequence[str]) -> str:
    """A Dagster op/job/graph name (``[A-Za-z0-9_]+``) for a multipart name: a readable prefix
    plus a hash of the exact parts, so ``my-table`` and ``my_table`` (or ``café`` and ``caf_``) differ."""
    readable = _UNSAFE_RUN.sub("_", "__".join(parts)).strip("_")[:_READABLE_MAX] or "t"
    digest = hashlib.sha256(json.dumps(list(parts)).encode()).hexdigest()[:10]
    return f"{readable}_{digest}"


class CatalogUnavailableError(RuntimeError):
    """The catalog is configured but cannot be reached or opened."""


class TableMissingError(LookupError):
    """The table does not exist (any more) in its catalog."""


@dataclass(frozen=True, order=True)
class TableRef:
    """One Iceberg table: catalog name, namespace parts, table name."""

    catalog: str
    namespace: tuple[str, ...]
    name: str

    @classmethod
    def parse(cls, text: str, default_catalog: str | None = None) -> TableRef:
        """Parse ``catalog.namespace.table`` (or ``namespace.table`` with a default catalog)."""
        parts = text.split(".")
        if len(parts) == 2 and default_catalog:
            parts = [default_catalog, *parts]
        if len(parts) < 3 or not all(_NAME_PART.fullmatch(p) for p in parts):
            raise ValueError(
                f"invalid table name {text!r}: expected catalog.namespace.table, no part empty or with a "
                "control character"
            )
        return cls(parts[0], tuple(parts[1:-1]), parts[-1])

    @property
    def identifier(self) -> tuple[str, ...]:
        """pyiceberg identifier (namespace parts + table)."""
        return (*self.namespace, self.name)

    @property
    def namespace_name(self) -> str:
        return ".".join(self.namespace)

    @property
    def asset_key_path(self) -> list[str]:
        return [self.catalog, *self.namespace, self.name]

    @property
    def safe_name(self) -> str:
        """A unique Dagster op/job name for the table (see :func:`dagster_name`)."""
        return dagster_name(self.asset_key_path)

    def __str__(self) -> str:
        return ".".join(self.asset_key_path)


def _check_reachable(name: str, props: dict[str, str]) -> None:
    uri = props.get("uri", "")
    if props.get("type", "sql") == "sql" and uri.startswith("sqlite:///"):
        # The query is not the path (and may hold a secret).
        path = Path(uri[len("sqlite:///"):].split("?")[0])
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
        raise CatalogUnavailableError(f"catalog {name!r} cannot be opened ({safe}): {redact_text(str(err), props)}") from err


def redact_text(text: str, props: dict[str, str]) -> str:
    """Driver errors may echo a URL or a credential: replace every value that is not known to be safe
    (and every URI password and query value) by ***, longest first."""
    secrets = {str(v) for k, v in props.items() if not is_safe_key(k) and str(v)}
    secrets |= {s for v in props.values() for s in uri_secrets(str(v))}
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
