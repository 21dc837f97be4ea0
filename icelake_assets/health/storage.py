"""Storage as Iceberg sees it: locations compared the way Iceberg compares them, and files listed
with a table's own FileIO (its catalog's ``s3.*``, ``gcs.*``... properties). The orphan scan
(health/orphans.py) and removal build on both."""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import urlsplit

from pyarrow import fs as pafs
from pyiceberg.io import FileIO

from icelake_assets.types import IcelakeError

# Iceberg's default equal_schemes (DeleteOrphanFilesSparkAction): s3a and s3n are s3.
EQUAL_SCHEMES = {"s3a": "s3", "s3n": "s3"}


class OrphanScanError(IcelakeError, RuntimeError):
    """Storage cannot be compared safely with the table's metadata: nothing may be deleted."""


# -- path equivalence -------------------------------------------------------------------------------


@dataclass(frozen=True)
class FileKey:
    """A location as Iceberg compares it: scheme and authority (None when absent) and a clean path, so
    ``file:/x``, ``file:///x`` and ``/x`` are one file and ``s3a://b/k`` is ``s3://b/k``."""

    scheme: str | None
    authority: str | None
    path: str

    def same_place(self, other: FileKey) -> bool:
        """Scheme and authority agree where both are known (Iceberg compares only non-null parts)."""
        return (self.scheme is None or other.scheme is None or self.scheme == other.scheme) and (
            self.authority is None or other.authority is None or self.authority == other.authority
        )

    def under(self, prefix: FileKey) -> bool:
        """This location equals ``prefix`` or lies inside it (whole path components)."""
        if not self.same_place(prefix):
            return False
        return self.path == prefix.path or self.path.startswith(prefix.path.rstrip("/") + "/")

    def __str__(self) -> str:
        head = f"{self.scheme}://{self.authority or ''}" if self.scheme else ""
        return head + self.path


def file_key(location: str) -> FileKey:
    parts = urlsplit(location)
    scheme = parts.scheme.lower() or None
    if scheme is not None and len(scheme) == 1:  # a Windows drive letter, not a scheme
        scheme, path, authority = None, location, None
    else:
        path, authority = parts.path, parts.netloc or None
    if scheme is not None:
        scheme = EQUAL_SCHEMES.get(scheme, scheme)
    path = re.sub(r"/{2,}", "/", path)
    if len(path) > 1:
        path = path.rstrip("/")
    return FileKey(scheme, authority, path)


def normalized_path(path: str) -> str:
    """Compare locations scheme-independently: file:/x, file:///x and /x are one file."""
    key = file_key(path)
    return f"{key.authority}{key.path}" if key.authority else key.path


# -- listing with the table's own FileIO ------------------------------------------------------------


def filesystem_for(io: FileIO, location: str) -> tuple[pafs.FileSystem, str, str]:
    """The table's FileIO filesystem (its catalog's ``s3.*``, ``gcs.*``... properties), the root to list
    and the prefix that turns a listed path back into a location (local files keep their bare path)."""
    from pyiceberg.io.pyarrow import PyArrowFileIO

    if isinstance(io, PyArrowFileIO):
        scheme, netloc, path = io.parse_location(location, io.properties)
        filesystem = io.fs_by_scheme(scheme, netloc)
    else:
        try:
            from pyiceberg.io.fsspec import FsspecFileIO
        except ImportError:  # pragma: no cover - fsspec is optional
            FsspecFileIO = None  # type: ignore[misc,assignment]
        if FsspecFileIO is None or not isinstance(io, FsspecFileIO):
            raise OrphanScanError(
                f"cannot list {location} with the table's FileIO {type(io).__name__}: "
                "orphan listing supports pyiceberg's PyArrowFileIO and FsspecFileIO"
            )
        parts = urlsplit(location)
        scheme, netloc = parts.scheme or "file", parts.netloc
        path = parts.path if scheme == "file" else f"{netloc}{parts.path}"
        filesystem = pafs.PyFileSystem(pafs.FSSpecHandler(io.get_fs(scheme)))
    if scheme == "file":
        prefix = ""
    elif scheme in ("hdfs", "viewfs"):
        prefix = f"{scheme}://{netloc}"
    else:
        prefix = f"{scheme}://"  # object stores list "bucket/key"
    return filesystem, path.rstrip("/") or "/", prefix


def listed_location(prefix: str, listed: str) -> str:
    """A listed path as a location; local listings may come back without their leading slash."""
    return prefix + listed if prefix or listed.startswith("/") else "/" + listed


def list_files(location: str, io: FileIO | None = None) -> list[pafs.FileInfo]:
    """Every file under ``location`` (recursively), listed with ``io``'s filesystem (default: a plain
    PyArrowFileIO, i.e. no catalog properties: pass the table's ``io``)."""
    if io is None:
        from pyiceberg.io.pyarrow import PyArrowFileIO

        io = PyArrowFileIO()
    filesystem, root, _ = filesystem_for(io, location)
    selector = pafs.FileSelector(root, recursive=True, allow_not_found=True)
    return [info for info in filesystem.get_file_info(selector) if info.type == pafs.FileType.File]


def file_state(io: FileIO, location: str) -> tuple[int, int | None] | None:
    """A file's (size, modification time in ns) now, through ``io``'s filesystem; None: it is gone."""
    filesystem, path, _ = filesystem_for(io, location)
    info = filesystem.get_file_info(path)
    if info.type == pafs.FileType.NotFound:
        return None
    return info.size or 0, info.mtime_ns
