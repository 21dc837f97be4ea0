"""Progress of a long rewrite, from the table's own commits: a partial-progress rewrite commits each
finished group of files, so a watcher that re-reads the table's metadata every few seconds can say how
many commits, files and bytes are done so far, while Spark works (Issue 25: a long rewrite logged
nothing until it ended). Read-only and Dagster-free: the caller passes where to say it."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from pyiceberg.table import Table

from icelake_assets.catalog.ancestry import ancestors
from icelake_assets.health.stats import MAINTENANCE_OPERATION

DEFAULT_EVERY_SECONDS = 30.0


@dataclass(frozen=True)
class RewriteProgress:
    """What the rewrite committed since it started (its ``replace`` snapshots; writers' commits are not counted)."""

    commits: int
    files_rewritten: int
    files_added: int
    bytes_rewritten: int
    elapsed_s: float

    def describe(self) -> str:
        return (
            f"rewrite in progress, {self.elapsed_s:.0f}s: {self.commits} commits so far, "
            f"{self.files_rewritten} → {self.files_added} data files, "
            f"{self.bytes_rewritten / 1_048_576:.1f} MiB rewritten"
        )


def progress_since(table: Table, snapshot_id: int | None, started: float) -> RewriteProgress:
    """The rewrite's commits on the current branch after ``snapshot_id``, from their summaries."""
    table.refresh()
    commits = rewritten = added = size = 0
    for snap in ancestors(table, until=snapshot_id):
        summary = snap.summary
        if summary is not None and summary.operation.value == MAINTENANCE_OPERATION:
            commits += 1
            rewritten += int(summary.get("deleted-data-files") or 0)
            added += int(summary.get("added-data-files") or 0)
            size += int(summary.get("removed-files-size") or 0)
    return RewriteProgress(commits, rewritten, added, size, time.monotonic() - started)


@contextmanager
def reporting(
    table: Table,
    snapshot_id: int | None,
    say: Callable[[str], None] | None,
    every_seconds: float = DEFAULT_EVERY_SECONDS,
) -> Iterator[None]:
    """While the body runs, say the rewrite's progress every ``every_seconds`` (nothing when ``say``
    is None). The watcher reads its own copy of the table, never the caller's."""
    if say is None:
        yield
        return
    stop = threading.Event()
    started = time.monotonic()
    # A separate Table object: refreshing it never changes what the caller holds.
    watched = Table(table.name(), table.metadata, table.metadata_location, table.io, table.catalog)

    def watch() -> None:
        while not stop.wait(every_seconds):
            try:
                say(progress_since(watched, snapshot_id, started).describe())
            except Exception as err:  # progress is best effort: the rewrite decides the outcome
                say(f"rewrite in progress, {time.monotonic() - started:.0f}s (progress unreadable: {err})")

    thread = threading.Thread(target=watch, name="icelake-rewrite-progress", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=every_seconds + 5)
