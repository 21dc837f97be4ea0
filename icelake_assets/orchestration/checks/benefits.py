"""What maintenance bought, lake-wide, for the overview: the proof-of-benefit figures of each table's
latest maintenance run (health/scan_cost.py, recorded by the run as scan/* and plan/* metadata),
summed. One event-log query for every table."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from dagster import AssetKey, DagsterInstance, MetadataValue


@dataclass(frozen=True)
class LakeBenefit:
    runs: int  # tables whose latest maintenance run measured its benefit
    files_saved: int  # files a full scan of each table no longer opens
    metadata_bytes_saved: int  # manifest list and manifest bytes planning no longer reads
    storage_reclaimed: int  # bytes of orphan files removed
    orphans_pending: int = 0  # bytes of orphan files recorded, waiting their recovery window

    def metadata(self) -> dict[str, MetadataValue]:
        return {
            "benefit/runs": MetadataValue.int(self.runs),
            "benefit/files_saved": MetadataValue.int(self.files_saved),
            "benefit/metadata_bytes_saved": MetadataValue.int(self.metadata_bytes_saved),
            "benefit/storage_reclaimed": MetadataValue.int(self.storage_reclaimed),
            "orphans/pending_bytes": MetadataValue.int(self.orphans_pending),
        }


def _number(metadata: dict[str, Any], key: str) -> int:
    value = metadata.get(key)
    value = getattr(value, "value", value)
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0


def lake_benefit(instance: DagsterInstance, keys: Sequence[AssetKey]) -> LakeBenefit:
    """The sums over each table's latest materialization (a maintenance run)."""
    latest = instance.get_latest_materialization_events(keys)
    runs = files = metadata_bytes = reclaimed = pending = 0
    for event in latest.values():
        materialization = event.asset_materialization if event is not None else None
        if materialization is None:
            continue
        md = dict(materialization.metadata)
        if "scan/files_before" in md:
            runs += 1
            files += _number(md, "scan/files_before") - _number(md, "scan/files_after")
            metadata_bytes += _number(md, "plan/bytes_before") - _number(md, "plan/bytes_after")
        if _number(md, "orphans/removed") > 0:
            # bytes/orphans_removed since two-phase removal; older runs removed all they found
            key = "bytes/orphans_removed" if "bytes/orphans_removed" in md else "bytes/orphans"
            reclaimed += _number(md, key)
        pending += _number(md, "bytes/orphans_pending")
    return LakeBenefit(runs, files, metadata_bytes, reclaimed, pending)
