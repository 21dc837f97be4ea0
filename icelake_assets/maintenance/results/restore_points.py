"""What ``manage_restore_points`` did: the tags it created (on which snapshot) and removed, and the
restore points the table has after it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from icelake_assets.maintenance.results.base import Details, OpResult
from icelake_assets.planning.restore_points import RESTORE_POINTS


@dataclass(frozen=True, kw_only=True)
class RestorePointResult(OpResult):
    op: ClassVar[str] = RESTORE_POINTS
    created: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    tagged_snapshot: int | None = None  # the snapshot the created tags point to
    restore_points_after: int | None = None

    def metrics(self) -> dict[str, int | None]:
        return {
            "restore_points/created": len(self.created) if self.acted else None,
            "restore_points/removed": len(self.removed) if self.acted else None,
            "restore_points/count": self.restore_points_after,
        }

    def did(self) -> str:
        parts = []
        if self.created:
            parts.append(
                f"{len(self.created)} restore points tagged on {self.tagged_snapshot} ({', '.join(self.created)})"
            )
        if self.removed:
            parts.append(f"{len(self.removed)} past their age removed ({', '.join(self.removed[:5])})")
        return "; ".join(parts) or self.reason

    def _details(self) -> Details:
        if not self.acted:
            return {}
        return {
            "created": list(self.created),
            "removed": list(self.removed),
            "tagged_snapshot": self.tagged_snapshot,
            "restore_points_after": self.restore_points_after,
        }
