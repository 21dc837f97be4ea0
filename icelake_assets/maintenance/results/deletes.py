"""What the data-file rewrite did about delete files, typed (parts of maintenance/results/models.py's
RewriteResult): the cleanup of dangling deletes after a delete-applying rewrite, and the position
deletes compacted by rewrite_position_delete_files instead of rewriting their data files."""

from __future__ import annotations

from dataclasses import dataclass, field

from icelake_assets.maintenance.results.base import Details, ProcedureRow
from icelake_assets.text import human_bytes


@dataclass(frozen=True)
class DanglingDeletes:
    """The cleanup after a delete-applying rewrite (runner._remove_dangling_deletes)."""

    commits: int = 0
    position: ProcedureRow = field(default_factory=dict)  # rewrite_position_delete_files' row
    equality: ProcedureRow = field(default_factory=dict)  # procedures.remove_dangling_deletes' counts
    error: str | None = None

    def to_dict(self) -> Details:
        out: Details = {"dangling_delete_commits": self.commits}
        out.update({f"position_deletes_{k}": v for k, v in self.position.items()})
        out.update(self.equality)
        if self.error is not None:
            out["dangling_deletes_error"] = self.error
        return out


@dataclass(frozen=True)
class PositionDeletes:
    """Position deletes compacted without touching data (rewrite_position_delete_files, rewrite-all),
    where only position deletes were due and the data files are not small (planning/deletes.py):
    the partitions, the ``where`` naming them, the estimate (the delete files' bytes, and the data
    bytes a delete-applying rewrite would have rewritten instead), and what was committed."""

    partitions: tuple[str, ...] = ()
    where: str | None = None
    estimated_bytes: int = 0
    data_bytes_not_rewritten: int = 0
    procedure: ProcedureRow = field(default_factory=dict)  # rewritten/added delete files and bytes
    delete_files_before: int | None = None
    delete_files_after: int | None = None
    commits: int = 0
    error: str | None = None

    @property
    def failed(self) -> bool:
        return self.error is not None

    def did(self) -> str:
        if self.error:
            return f"position deletes not compacted ({self.error})"
        return (
            f"{self.delete_files_before} → {self.delete_files_after} position delete files in "
            f"{len(self.partitions)} partitions ({human_bytes(self.estimated_bytes)} instead of "
            f"{human_bytes(self.data_bytes_not_rewritten)} of data rewritten)"
        )

    def to_dict(self) -> Details:
        out: Details = {
            "partitions": list(self.partitions),
            "where": self.where,
            "estimated_bytes": self.estimated_bytes,
            "data_bytes_not_rewritten": self.data_bytes_not_rewritten,
            "procedure": dict(self.procedure),
            "delete_files_before": self.delete_files_before,
            "delete_files_after": self.delete_files_after,
            "commits": self.commits,
        }
        if self.error is not None:
            out["error"] = self.error
        return out
