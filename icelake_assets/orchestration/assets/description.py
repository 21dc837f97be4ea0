"""What the Dagster UI shows of each table asset without running anything: its description, kinds,
tags, group and definition metadata. These are fixed when the code location loads; the table's
health, which changes with every commit, is shown by its checks (docs/health.md, "At a glance")."""

import re
from typing import Any

from dagster import MetadataValue

from icelake_assets.catalog.connection import TableRef
from icelake_assets.catalog.discovery import DiscoveredTable
from icelake_assets.orchestration.checks.configuration import policy_asset_metadata
from icelake_assets.policies import EffectivePolicy
from icelake_assets.private_api import build_kind_tag

# Kinds: the catalog list shows them beside the name, the lineage node at its foot.
_KIND_TAGS = {**build_kind_tag("iceberg"), **build_kind_tag("spark")}
# How to read the table's health at a glance: the catalog list shows the description's first line,
# the lineage node (with its Description facet on) too, and both show the checks' severities.
HEALTH_LEGEND = "health: its `health` check (red Critical, yellow Warning or Unknown, green Healthy)"


def asset_tags(ref: TableRef, policy: EffectivePolicy | None) -> dict[str, str]:
    return {"icelake/catalog": ref.catalog, **(policy.asset_tags() if policy else {}), **_KIND_TAGS}


def asset_group(ref: TableRef) -> str:
    return re.sub(r"[^A-Za-z0-9_]+", "_", ref.namespace_name).strip("_") or "default"


def describe(table: DiscoveredTable) -> str:
    """The first line names the table (or its comment) and where its health is; the rest explains
    what a materialization of it means."""
    comment = table.properties.get("comment") or table.properties.get("description")
    first = (comment or f"Iceberg table `{table.ref}`").strip().splitlines()[0].rstrip(".")
    lines = [
        f"{first}; {HEALTH_LEGEND}.",
        "",
        "The `health` check gives the status, the score and each failing check. A materialization here "
        "is a maintenance run, not a write: 'Never materialized' only means no maintenance ran yet "
        "(writers are the upstream assets). Maintenance runs on Spark: expire_snapshots → "
        "remove_orphan_files → rewrite_data_files → rewrite_manifests → compute_statistics → validate; "
        "each op acts "
        "only past its own threshold.",
    ]
    if comment and "\n" in comment.strip():
        lines[1:1] = ["", comment.strip()]
    return "\n".join(lines)


def asset_metadata(table: DiscoveredTable, policy: EffectivePolicy | None = None) -> dict[str, Any]:
    return {
        **(policy_asset_metadata(policy) if policy else {}),
        "location": MetadataValue.path(table.location),
        "format_version": MetadataValue.int(table.format_version),
        "partition_spec": MetadataValue.text(table.partition_spec),
        "sort_order": MetadataValue.text(table.sort_order),
        "current_snapshot_id": MetadataValue.text(str(table.current_snapshot_id)),
    }
