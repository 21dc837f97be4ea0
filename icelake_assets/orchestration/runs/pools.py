"""A table's concurrency pool: every op of its maintenance claims it (run model, model.py). Tables
share ``automation.maintenance_pools`` pools by a stable hash of their name, so 10,000 tables need no
10,000 op definitions (assets/table_groups.py builds one graph per pool)."""

from __future__ import annotations

import hashlib

from icelake_assets.catalog.connection import TableRef

POOL_PREFIX = "icelake/"


def pool_index(ref: TableRef, pools: int) -> int:
    """The table's pool among ``pools`` (a stable hash of its exact name)."""
    digest = hashlib.sha256(str(ref.asset_key_path).encode()).digest()
    return int.from_bytes(digest[:8], "big") % pools


def pool_name(ref: TableRef, pools: int) -> str:
    """The concurrency pool every op of the table's maintenance claims."""
    return f"{POOL_PREFIX}maintain_{pool_index(ref, pools):03d}"
