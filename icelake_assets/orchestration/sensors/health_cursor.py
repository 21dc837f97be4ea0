"""The health sensor's cursor: per table the metadata file it last judged, and per partitioned table the
digest of each partition's health last reported (planning/partition_changes.py), as JSON::

    {"v": 2,
     "tables": {"demo.taxi.trips": "s3://.../00012-3f2a.metadata.json", ...},
     "partitions": {"demo.taxi.trips": {"2024-03-01": "9c1f0e2a7b3d", ...}},
     "pending": {"1767225600000000000": {"demo.taxi.trips": {"2024-03-02": "04be...", "2024-02-01": null}}},
     "due": ["demo.sales.orders"]}

``partitions`` holds what a report run confirmed; ``pending`` what a report run was asked for and has
not ended (by the run's request id, in request order; ``null``: a key reported empty, then forgotten).
A partition is compared with its pending digest first, so a tick while the run waits in the queue does
not ask again. ``due``: tables whose partitions must be compared again although their metadata did not
change (their report run failed, or a tick's report was full).

The flat JSON of earlier versions (``{table: metadata location}``) is read as ``tables``: a running
sensor keeps its state across the upgrade (every partitioned table's partitions are then reported once).
An unreadable cursor costs one evaluation of every table. Dagster-free."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum

VERSION = 2


class RunOutcome(Enum):
    SUCCEEDED = "succeeded"
    FAILED = "failed"  # failed, canceled, or never created: its partitions are asked for again
    WAITING = "waiting"  # queued or running


@dataclass
class HealthCursor:
    tables: dict[str, str] = field(default_factory=dict)
    partitions: dict[str, dict[str, str]] = field(default_factory=dict)
    pending: dict[str, dict[str, dict[str, str | None]]] = field(default_factory=dict)
    due: set[str] = field(default_factory=set)

    @classmethod
    def loads(cls, text: str | None) -> HealthCursor:
        if not text:
            return cls()
        try:
            data = json.loads(text)
            if not isinstance(data, dict):
                raise ValueError("not an object")
            if data.get("v") != VERSION:  # the flat cursor of earlier versions
                return cls(tables={str(k): str(v) for k, v in data.items()})
            return cls(
                tables=dict(data.get("tables", {})),
                partitions={t: dict(d) for t, d in data.get("partitions", {}).items()},
                pending={r: {t: dict(d) for t, d in ts.items()} for r, ts in data.get("pending", {}).items()},
                due=set(data.get("due", [])),
            )
        except (ValueError, TypeError, AttributeError):
            return cls()  # one evaluation of every table

    def dumps(self) -> str:
        return json.dumps(
            {
                "v": VERSION,
                "tables": self.tables,
                "partitions": {t: d for t, d in self.partitions.items() if d},
                "pending": self.pending,
                "due": sorted(self.due),
            },
            separators=(",", ":"),
        )

    def known(self, table: str) -> dict[str, str]:
        """The digests a table's partitions were last reported (or asked to be) at."""
        out = dict(self.partitions.get(table, {}))
        for request in sorted(self.pending, key=int):
            for key, digest in self.pending[request].get(table, {}).items():
                if digest is None:
                    out.pop(key, None)
                else:
                    out[key] = digest
        return out

    def request(self, request_id: str, digests: Mapping[str, Mapping[str, str | None]]) -> None:
        """A report run was asked for ``digests`` (by table, by key) under ``request_id``."""
        if digests:
            self.pending[request_id] = {t: dict(d) for t, d in digests.items()}
            self.due -= set(digests)

    def settle(self, outcomes: Mapping[str, RunOutcome]) -> None:
        """The pending requests whose run ended: a success makes its digests the reported ones; a failure
        drops them and makes its tables due again. Requests without an outcome stay pending."""
        for request in sorted(self.pending, key=int):
            outcome = outcomes.get(request, RunOutcome.WAITING)
            if outcome is RunOutcome.WAITING:
                continue
            tables = self.pending.pop(request)
            if outcome is RunOutcome.FAILED:
                self.due |= set(tables)
                continue
            for table, digests in tables.items():
                reported = self.partitions.setdefault(table, {})
                for key, digest in digests.items():
                    if digest is None:
                        reported.pop(key, None)
                    else:
                        reported[key] = digest

    def forget(self, table: str) -> None:
        """A table that left the lake (or its partition checks): nothing of it is kept."""
        self.partitions.pop(table, None)
        self.due.discard(table)
