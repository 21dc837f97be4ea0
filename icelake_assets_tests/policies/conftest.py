"""Shared by the policy tests: a two-catalog settings file and the table most tests resolve."""

from pathlib import Path
from typing import Any

from icelake_assets.settings import Settings, parse_settings
from icelake_assets.types import TableRef

TRIPS = TableRef.parse("c1.taxi.trips")


def settings(extra: dict[str, Any] | None = None, uri: str = "sqlite:///c.db") -> Settings:
    data = {
        "catalogs": {"c1": {"type": "sql", "uri": uri}, "c2": {"type": "sql", "uri": uri}},
        **(extra or {}),
    }
    return parse_settings(data, "/etc/lake/icelake.yaml", Path("/tmp"))


def merge(a: dict, b: dict) -> dict:
    out = dict(a)
    for k, v in b.items():
        out[k] = merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out
