"""The scan reports section of the settings (docs/layout.md, "Collecting scan reports"): where the
engines' reporter writes, and the internal table the sensor ingests into (audit/scan_reports.py)."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import urlsplit

from pydantic import Field, field_validator

from icelake_assets.settings.policy_schema import INTERNAL_NAMESPACE, StrictModel


def internal_table(v: str, why: str) -> str:
    """``namespace.table`` in the internal namespace (the product's own tables, never maintained)."""
    parts = v.split(".")
    if len(parts) < 2 or not all(re.fullmatch(r"[A-Za-z0-9_\-]+", p) for p in parts):
        raise ValueError("must be namespace.table of letters, digits, '_' or '-'")
    if parts[0] != INTERNAL_NAMESPACE:
        raise ValueError(f"must be in the {INTERNAL_NAMESPACE!r} namespace, which discovery skips ({why})")
    return v


SCAN_REPORT_SCHEMES = ("file", "s3", "s3a", "s3n")


class ScanReportSettings(StrictModel):
    """Scan reports collected from the engines (docs/layout.md, "Collecting scan reports")."""

    # Where the reporter writes one JSON file per scan: a local folder (relative: to the settings file)
    # or s3://bucket/prefix. None: off (no reporter in the product's Spark sessions, no sensor).
    dir: str | None = None
    # The table the sensor ingests the reports into, in the internal namespace.
    table: str = f"{INTERNAL_NAMESPACE}.scan_reports"
    # Catalog that holds it, and whose s3.* properties read the folder; None: the audit's catalog.
    catalog: str | None = None
    # How often the sensor ingests new reports.
    interval_seconds: int = Field(60, ge=10, le=24 * 3600)
    # How often the sensor chooses a table's layout again once it has new reports (a sample is read
    # and replayed: seconds per table), and how many tables one tick chooses for at most.
    choose_every_hours: float = Field(24, gt=0, le=24 * 30)
    choose_per_tick: int = Field(3, ge=1, le=100)

    @field_validator("dir")
    @classmethod
    def _dir(cls, v: str | None) -> str | None:
        if v is None:
            return v
        v = v.strip()
        scheme = urlsplit(v).scheme.lower()
        if not v or (len(scheme) > 1 and scheme not in SCAN_REPORT_SCHEMES):
            raise ValueError(
                f"{v!r}: a local folder or a URI of {', '.join(s + '://' for s in SCAN_REPORT_SCHEMES)}"
            )
        if scheme in SCAN_REPORT_SCHEMES[1:] and not urlsplit(v).netloc:
            raise ValueError(f"{v!r}: names no bucket")
        return v

    @field_validator("table")
    @classmethod
    def _table(cls, v: str) -> str:
        return internal_table(v, "the reports are the product's own")

    @property
    def uri(self) -> str | None:
        """The folder as a URI (a local folder as ``file:///...``, as Hadoop and pyarrow read it)."""
        if self.dir is None or len(urlsplit(self.dir).scheme) > 1:
            return self.dir
        return Path(self.dir).expanduser().resolve().as_uri()
