"""Dagster's rules for the values the settings hand to Dagster (cron strings, asset owners and tags),
checked when the settings load so a bad value names its settings key instead of failing in Dagster.

Owners and tags: Dagster's regular expressions, restated here (dagster/_core/utils.py and
dagster/_utils/tags.py; a test compares them with Dagster's). Cron: Dagster's own check, which relies
on its vendored croniter; this is the one module outside orchestration/ that imports Dagster
(an explicit exception in the import contracts, pyproject.toml)."""

from __future__ import annotations

import re

from icelake_assets.private_api import is_valid_cron_string as _dagster_cron_rule

_EMAIL = re.compile(r"\b[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Z|a-z]{2,7}\b")
_TAG_KEY = re.compile(r"^([A-Za-z0-9_.-]{1,63}/|dagster/kind/)?[A-Za-z0-9_.-]{1,63}$")
_STRICT_TAG_VALUE = re.compile(r"^[A-Za-z0-9_.-]{0,63}$")


def is_valid_cron_string(cron: str) -> bool:
    """A 5-field cron expression Dagster accepts (not seconds resolution, no 30/31 February)."""
    return bool(_dagster_cron_rule(cron))


def is_valid_owner(owner: str) -> bool:
    """An e-mail address or ``team:<name>``."""
    return bool(_EMAIL.fullmatch(owner)) or (owner.startswith("team:") and len(owner) > 5)


def is_valid_tag_key(key: str) -> bool:
    return bool(_TAG_KEY.match(key))


def is_valid_strict_tag_value(value: str) -> bool:
    return bool(_STRICT_TAG_VALUE.match(value))
