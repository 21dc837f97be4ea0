"""The documented JSON shapes of the operator commands (docs/operating.md), as checked by the tests:
every key present, no other key, each value of its type. And the test lake with a held table."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField, StringType

from icelake_assets.catalog.connection import open_catalog
from icelake_assets.types import TableRef
from icelake_assets_tests.conftest import TEST_THRESHOLDS, catalog_name

STR, INT, BOOL, DICT = str, int, bool, dict
OPT_STR, OPT_INT = (str, type(None)), (int, type(None))

PLAN: dict[str, Any] = {
    "schema": "icelake.plan/v1",
    "table": STR,
    "asset_key": STR,
    "mode": STR,
    "mode_source": STR,
    "snapshot_id": OPT_INT,
    "planned_at": STR,
    "ops": [{"op": STR, "act": BOOL, "reason": STR, "signals": DICT}],
    "orphans_evaluated": BOOL,
    "partitions": [STR],
    "partitions_excluded": DICT,
    "rewrite_options": DICT,
    "estimate": {
        "rewrite_bytes": INT,
        "rewrite_files": INT,
        "rewrite_groups": INT,
        "max_rewrite_bytes": INT,
        "expirable_snapshots": INT,
        "position_delete_bytes": INT,
    },
    "position_deletes": {
        "partitions": [STR],
        "delete_bytes": INT,
        "data_bytes_not_rewritten": INT,
        "reason": STR,
    },
    "data_expiry": (
        type(None),
        {
            "rows": INT,
            "files": INT,
            "bytes": INT,
            "cutoff": OPT_STR,
            "metadata_only": BOOL,
            "first_expiry": BOOL,
        },
    ),
    "guards": {"verdict": ("allow", "defer", "hold", "skip"), "reason": STR, "details": DICT},
    "outcome": ("launched", "proposed", "observed", "deferred", "held", "skipped"),
    "enforce": {"action": ("launch", "defer", "hold", "nothing"), "ops": [STR]},
    "approve": {"awaiting": BOOL, "command": STR},
    "launch": {"shared": BOOL, "reason": STR},
    "statistics": (
        type(None),
        {
            "columns": [STR],
            "how": STR,
            "snapshot_id": OPT_INT,
            "current": BOOL,
            "rows": INT,
            "rows_at": OPT_INT,
            "partition_stats": BOOL,
        },
    ),
    "digest": STR,
}
RECORD: dict[str, Any] = {
    "table_name": STR,
    "kind": ("decision", "op", "validation", "rollback", "agent"),
    "decision": STR,
    "trigger": ("sensor", "schedule", "backfill", "manual", "agent"),
    "reason": STR,
    "run_id": OPT_STR,
    "op": OPT_STR,
    "signals": DICT,
    "policy": DICT,
    "partitions": [STR],
    "partitions_reason": OPT_STR,
    "failed_partitions": [STR],
    "writer_check": (dict, type(None)),
    "cost_estimate_bytes": OPT_INT,
    "snapshot_before": OPT_INT,
    "snapshot_after": OPT_INT,
    "results": DICT,
    "rolled_back_to": OPT_INT,
    "duration_s": (float, type(None)),
    "recorded_at": STR,
    "record_id": STR,
}
AUDIT: dict[str, Any] = {
    "schema": "icelake.audit/v1",
    "log": STR,
    "table": OPT_STR,
    "since": OPT_STR,
    "limit": OPT_INT,
    "records": [RECORD],
}
APPROVAL: dict[str, Any] = {
    "schema": "icelake.approval/v1",
    "table": STR,
    "run_id": STR,
    "run_url": STR,
    "job": STR,
    "dagster_url": STR,
    "approved_by": STR,
    "approved_at": STR,
    "plan_digest": STR,
    "audit_record_id": OPT_STR,
    "tags": DICT,
    "plan": PLAN,
}
HEALTH: dict[str, Any] = {
    "schema": "icelake.health/v1",
    "tables": [
        {
            "table": STR,
            "status": ("Healthy", "Warning", "Critical", "Unknown"),
            "score": INT,
            "stats": {
                "data_files": INT,
                "small_files": INT,
                "delete_files": INT,
                "snapshots": INT,
                "manifests": INT,
            },
            "findings": [
                {"check": STR, "severity": STR, "passed": BOOL, "summary": STR, "recommendation": STR}
            ],
            "not_evaluated": [STR],
        }
    ],
    "overview": (
        type(None),
        [
            {
                "rank": INT,
                "table": STR,
                "status": STR,
                "unhealthy_partitions": OPT_INT,
                "files_saved": INT,
                "manifests_saved": INT,
                "expirable_snapshots": INT,
                "rewrite_bytes": INT,
                "actions": [STR],
                "why": STR,
            }
        ],
    ),
    "problems": [STR],
}
POLICY: dict[str, Any] = {
    "schema": "icelake.policy/v1",
    "table": STR,
    "exists": BOOL,
    "mode": ("observe", "propose", "enforce"),
    "mode_source": STR,
    "settings": STR,
    "values": [{"key": STR, "value": object, "text": STR, "source": STR}],
    "problems": [STR],
}


ORPHANS: dict[str, Any] = {
    "schema": "icelake.orphans/v1",
    "store": STR,
    "table": STR,
    "recovery_window_hours": (int, float),
    "now": STR,
    "pending": [{"path": STR, "size": INT, "first_seen": STR, "removable_after": STR}],
    "totals": {
        "candidates": INT,
        "bytes": INT,
        "pending": INT,
        "pending_bytes": INT,
        "removable": INT,
        "removable_bytes": INT,
    },
}


def assert_shape(value: Any, spec: Any, where: str = "$") -> None:
    """``spec``: a dict (exactly these keys), a one-element list (every item), a type or tuple of
    types, a tuple of strings (one of these values), a string (this value), or a tuple mixing None's
    type with a dict/list spec (null or that shape)."""
    if isinstance(spec, dict):
        assert isinstance(value, dict), f"{where}: expected an object, got {value!r}"
        assert set(value) == set(spec), f"{where}: keys {sorted(value)} != {sorted(spec)}"
        for key, sub in spec.items():
            assert_shape(value[key], sub, f"{where}.{key}")
    elif isinstance(spec, list):
        assert isinstance(value, list), f"{where}: expected a list, got {value!r}"
        for i, item in enumerate(value):
            assert_shape(item, spec[0], f"{where}[{i}]")
    elif isinstance(spec, str):
        assert value == spec, f"{where}: {value!r} != {spec!r}"
    elif isinstance(spec, tuple) and spec and all(isinstance(s, str) for s in spec):
        assert value in spec, f"{where}: {value!r} not one of {spec}"
    elif isinstance(spec, tuple) and any(isinstance(s, (dict, list)) for s in spec):
        if value is None:
            return
        assert_shape(value, next(s for s in spec if isinstance(s, (dict, list))), where)
    else:
        assert isinstance(value, spec) and not (
            isinstance(value, bool) and spec in (int, (int, type(None)))
        ), f"{where}: {value!r} is not {spec}"


SCHEMA = Schema(NestedField(1, "id", LongType()), NestedField(2, "payload", StringType()))


def _append(table, files: int, rows: int, width: int) -> None:
    for i in range(files):
        rng = np.random.default_rng(i)
        payload = [rng.bytes(width).hex() for _ in range(rows)]
        table.append(
            pa.table(
                {"id": pa.array(range(i * rows, (i + 1) * rows), pa.int64()), "payload": pa.array(payload)}
            )
        )


def held_lake(make_lake):
    """A lake in mode propose with ``ns.t`` in mode enforce (25 files of ~64 KiB of incompressible text:
    about 1.6 MiB to rewrite, over a 1 MiB cost cap: held) and ``ns.small`` (25 tiny files: proposed)."""
    settings = make_lake(
        thresholds={
            **TEST_THRESHOLDS,
            "mode": "propose",
            "guards": {"quiet_period_minutes": 0, "max_rewrite_bytes": 1024 * 1024},
        },
        extra={"policies": {"tables": {"ns.t": {"mode": "enforce"}}}},
    )
    name = catalog_name(settings)
    cat = open_catalog(settings, name, create=True)
    cat.create_namespace("ns")
    _append(cat.create_table(("ns", "t"), SCHEMA), 25, 2000, 16)
    _append(cat.create_table(("ns", "small"), SCHEMA), 25, 10, 8)
    return settings, TableRef(name, ("ns",), "t"), TableRef(name, ("ns",), "small")
