"""Human units for the text people read in the Dagster UI (numbers for plots stay Int/Float metadata).

Sizes come from ``rich`` (a dependency of dagster; decimal units: 1 kB = 1000 bytes) and durations
from dagster's own formatter, so they read like the run durations the UI shows (533ms, 5.6s, 4m52s).
"""

import re

from dagster_shared.utils.timing import format_duration

from icelake_assets.text import human_bytes


def human_duration(seconds: float) -> str:
    """8.729 -> '8.73s'; 125.3 -> '2m5s'."""
    return format_duration(float(seconds) * 1000)


def readable(text: str) -> str:
    """Byte counts written out in a sentence ('averaging < 134217728 bytes') in human units."""
    return re.sub(r"\b(\d{4,}) bytes\b", lambda m: human_bytes(int(m.group(1))), text)


def md_cell(text: str, limit: int = 90) -> str:
    """Text made safe for one markdown table cell, cut to ``limit`` characters."""
    text = " ".join(readable(str(text)).split()).replace("|", "\\|")
    return text if len(text) <= limit else text[: limit - 1] + "…"
