"""Types shared across layers. Imports nothing from the package (as pyiceberg's ``typedef.py``),
so every module can use them without an import cycle."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field


class IcelakeError(Exception):
    """Base of every error this package raises on purpose (catch it to catch them all)."""


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


# Table properties that send a table's files outside its location (orphan removal must spare them).
WRITE_PATH_PROPERTIES = (
    "write.data.path",
    "write.metadata.path",
    "write.object-storage.path",
    "write.folder-storage.path",
)


@dataclass(frozen=True)
class KnownTable:
    """Another table of a configured catalog: where it lives and where it writes."""

    name: str
    location: str
    properties: dict[str, str] = field(default_factory=dict)

    @property
    def write_paths(self) -> dict[str, str]:
        """Where it writes files: its explicit write paths, else the default data and metadata folders."""
        loc = self.location.rstrip("/")
        paths = {"write.data.path": f"{loc}/data", "write.metadata.path": f"{loc}/metadata"}
        paths.update({k: self.properties[k] for k in WRITE_PATH_PROPERTIES if self.properties.get(k)})
        return paths


@dataclass(frozen=True)
class UnlistedTable:
    """A table, or a whole catalog, whose location could not be read: where it probably lives
    (``hints``; empty: it could be anywhere) and why it could not be listed."""

    name: str
    cause: str
    hints: tuple[str, ...] = ()


@dataclass(frozen=True)
class KnownTables:
    """Every table of every configured catalog that could be read, and those that could not (orphan
    removal must not clean a location one of them may share)."""

    tables: tuple[KnownTable, ...] = ()
    unlisted: tuple[UnlistedTable, ...] = ()

    @property
    def complete(self) -> bool:
        return not self.unlisted


# The snapshot summary properties naming the run that made a maintenance commit (set by
# maintenance/spark/commit_tags.py, read back by audit/reconcile.py): shared names of two sibling layers.
SNAPSHOT_RUN_ID = "icelake.run-id"
SNAPSHOT_OP = "icelake.op"
SNAPSHOT_ATTEMPT = "icelake.attempt"
# What an expire_data commit was bound by (planning/data_retention.py): the policy digest, keep_days
# and the cut-off before it was lowered to a partition boundary (ISO, UTC).
SNAPSHOT_RETENTION_POLICY = "icelake.retention-policy"
SNAPSHOT_RETENTION_KEEP_DAYS = "icelake.retention-keep-days"
SNAPSHOT_RETENTION_CUTOFF = "icelake.retention-cutoff"
