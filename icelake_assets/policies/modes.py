"""What a mode lets automation do with a table whose thresholds say it needs maintenance."""

from __future__ import annotations

from typing import Literal

from icelake_assets.settings import Mode

Action = Literal["launch", "record", "nothing"]


def decide_action(mode: Mode, wants_to_act: bool) -> Action:
    """What a sensor tick does with a table whose thresholds say ``wants_to_act``.

    observe: checks only, nothing is recorded or launched; propose: the would-be run is recorded
    (an observation), nothing is launched; enforce: the run is launched."""
    if mode not in ("observe", "propose", "enforce"):
        raise ValueError(f"unknown mode {mode!r}: expected 'observe', 'propose' or 'enforce'")
    if not wants_to_act or mode == "observe":
        return "nothing"
    return "launch" if mode == "enforce" else "record"
