"""What a full scan of a table costs a reader, and what a maintenance run bought (proof of benefit).

Compaction is worth its cost only if readers plan and scan faster afterwards ("if the metrics do not
improve, the partition selection or file size targets need adjustment"). A run measures both sides on
the same table in the same process: the snapshot it started from and the one it ended on. pyiceberg
plans a full scan of each (no Spark): planning reads the manifest list and every manifest (their count,
bytes and the wall time), and the plan lists what a reader would open (data files, delete files, bytes).
The before snapshot is still there after the run: expiry never removes the snapshot that was current.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass

from pyiceberg.manifest import DataFileContent
from pyiceberg.table import Table

from icelake_assets.text import human_bytes


@dataclass(frozen=True)
class ScanCost:
    """A full scan of one snapshot: planning (manifests, metadata bytes, seconds) and what it opens."""

    snapshot_id: int | None
    plan_seconds: float
    manifests: int
    metadata_bytes: int  # the manifest list and every manifest planning reads
    data_files: int
    delete_files: int
    data_bytes: int

    @property
    def files_opened(self) -> int:
        return self.data_files + self.delete_files


def measure_scan_cost(table: Table, snapshot_id: int | None = None) -> ScanCost:
    """Plan a full scan of ``snapshot_id`` (default: the current one) and count what it reads.

    Planning is read the way a planner does it, from the manifest list and every manifest's live
    entries, rather than with ``Table.scan().plan_files()``: pyiceberg's planner refuses tables with
    equality deletes, which are exactly the tables a delete-applying rewrite heals. With no filter
    every live data file is opened, and every live delete file is read by some task."""
    snapshot = table.snapshot_by_id(snapshot_id) if snapshot_id is not None else table.current_snapshot()
    if snapshot is None:
        return ScanCost(snapshot_id, 0.0, 0, 0, 0, 0, 0)
    started = time.perf_counter()
    manifests = snapshot.manifests(table.io)
    files = [e.data_file for m in manifests for e in m.fetch_manifest_entry(table.io, discard_deleted=True)]
    seconds = time.perf_counter() - started
    list_bytes = len(table.io.new_input(snapshot.manifest_list)) if snapshot.manifest_list else 0
    data = [f for f in files if f.content == DataFileContent.DATA]
    deletes = [f for f in files if f.content != DataFileContent.DATA]
    return ScanCost(
        snapshot_id=snapshot.snapshot_id,
        plan_seconds=round(seconds, 4),
        manifests=len(manifests),
        metadata_bytes=list_bytes + sum(m.manifest_length for m in manifests),
        data_files=len(data),
        delete_files=len(deletes),
        data_bytes=sum(f.file_size_in_bytes for f in files),
    )


@dataclass(frozen=True)
class ScanBenefit:
    """The same table's full-scan cost before and after a run."""

    before: ScanCost
    after: ScanCost
    # Opt-in (loop.scan_probe): a full-scan query's seconds on each snapshot (maintenance/verify/scan_probe.py).
    probe_seconds: tuple[float, float] | None = None
    probe_query: str | None = None  # the policy's query the probe timed (None: a full scan)

    @property
    def files_saved(self) -> int:
        return self.before.files_opened - self.after.files_opened

    @property
    def manifests_saved(self) -> int:
        return self.before.manifests - self.after.manifests

    @property
    def metadata_bytes_saved(self) -> int:
        return self.before.metadata_bytes - self.after.metadata_bytes

    @property
    def nil(self) -> bool:
        """No reader gains: no fewer files to open, no fewer manifests or metadata bytes to plan from."""
        return self.files_saved <= 0 and self.manifests_saved <= 0 and self.metadata_bytes_saved <= 0

    def describe(self) -> str:
        b, a = self.before, self.after
        numbers = (
            f"a full scan opens {b.files_opened:,} → {a.files_opened:,} files; planning reads "
            f"{b.manifests:,} → {a.manifests:,} manifests ({human_bytes(b.metadata_bytes)} → "
            f"{human_bytes(a.metadata_bytes)}) in {b.plan_seconds:.2f} → {a.plan_seconds:.2f} s"
        )
        if self.probe_seconds is not None:
            what = "the policy's query" if self.probe_query else "a full-scan query"
            numbers += f"; {what} took {self.probe_seconds[0]:.2f} → {self.probe_seconds[1]:.2f} s"
        return ("no benefit to readers: " if self.nil else "") + numbers

    def to_dict(self) -> dict[str, object]:
        return {
            "before": asdict(self.before),
            "after": asdict(self.after),
            "files_saved": self.files_saved,
            "manifests_saved": self.manifests_saved,
            "metadata_bytes_saved": self.metadata_bytes_saved,
            "nil": self.nil,
            **(
                {
                    "probe_seconds": {"before": self.probe_seconds[0], "after": self.probe_seconds[1]},
                    "probe_query": self.probe_query,
                }
                if self.probe_seconds is not None
                else {}
            ),
        }
