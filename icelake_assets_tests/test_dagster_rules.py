"""The owner and tag rules restated in dagster_rules.py agree with Dagster's own."""

import pytest
from dagster._core.definitions.utils import is_valid_owner as dagster_owner
from dagster._utils.schedules import is_valid_cron_string as dagster_cron
from dagster._utils.tags import is_valid_strict_tag_value as dagster_value, is_valid_tag_key as dagster_key

from icelake_assets.dagster_rules import (
    is_valid_cron_string,
    is_valid_owner,
    is_valid_strict_tag_value,
    is_valid_tag_key,
)

OWNERS = ["a@b.co", "team:data", "team:", "team", "x@y", "first.last+x@sub.example.org", "", " a@b.co"]
KEYS = [
    "k",
    "a/b",
    "a/b/c",
    "dagster/kind/iceberg",
    "dagster/kind/x/y",
    "x" * 63,
    "x" * 64,
    "",
    "a b",
    "p" * 63 + "/v",
    "/v",
    "café",
]
VALUES = ["", "v", "v-1.2_3", "x" * 63, "x" * 64, "a b", "a/b", "é"]
CRONS = ["0 3 * * *", "*/5 * * * *", "0 0 30 2 *", "0 0 * * * *", "@daily", "nonsense", "0 3 * * MON-FRI"]


@pytest.mark.parametrize("owner", OWNERS)
def test_owner_rule_is_dagsters(owner):
    assert is_valid_owner(owner) == dagster_owner(owner)


@pytest.mark.parametrize("key", KEYS)
def test_tag_key_rule_is_dagsters(key):
    assert is_valid_tag_key(key) == dagster_key(key)


@pytest.mark.parametrize("value", VALUES)
def test_tag_value_rule_is_dagsters(value):
    assert is_valid_strict_tag_value(value) == dagster_value(value)


@pytest.mark.parametrize("cron", CRONS)
def test_cron_rule_is_dagsters(cron):
    assert is_valid_cron_string(cron) == dagster_cron(cron)
