"""Audit trail: one record per maintenance decision and per op, stored as an Iceberg table in the lake
(:mod:`.store`) and mirrored in Dagster metadata and tags (:mod:`.records`)."""

from icelake_assets.audit.records import (
    DECISIONS,
    AuditRecord,
    dagster_tags,
    trigger_from_tags,
)
from icelake_assets.audit.store import DEFAULT_TABLE, AuditLog, AuditLogError

__all__ = [
    "DECISIONS",
    "DEFAULT_TABLE",
    "AuditLog",
    "AuditLogError",
    "AuditRecord",
    "dagster_tags",
    "trigger_from_tags",
]
