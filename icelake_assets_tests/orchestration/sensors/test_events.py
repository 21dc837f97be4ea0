"""The sensor's run requests for a time-partitioned table (orchestration/sensors/events.py)."""

from types import SimpleNamespace

from dagster import DailyPartitionsDefinition

from icelake_assets.catalog.connection import TableRef
from icelake_assets.orchestration.sensors import events
from icelake_assets.private_api import ASSET_PARTITION_RANGE_END_TAG, ASSET_PARTITION_RANGE_START_TAG

# Loaded before the first rows of 2026-11-27 landed: its last partition is 2026-11-26.
PDEF = DailyPartitionsDefinition(start_date="2026-11-20", end_date="2026-11-27")
TABLE = SimpleNamespace(ref=TableRef("c", ("ns",), "t"))


def _requests(monkeypatch, keys):
    monkeypatch.setattr(events, "offending_partition_keys", lambda table, stats, pdef: keys)
    return events._run_requests(TABLE, PDEF, None, ["rewrite_data_files"], {})  # noqa: SLF001


def test_offending_partitions_the_definitions_know_make_a_range(monkeypatch):
    [request] = _requests(monkeypatch, ["2026-11-24", "2026-11-26"])
    assert request.tags[ASSET_PARTITION_RANGE_START_TAG] == "2026-11-24"
    assert request.tags[ASSET_PARTITION_RANGE_END_TAG] == "2026-11-26"


def test_a_period_the_loaded_definitions_do_not_know_yet_makes_a_whole_table_run(monkeypatch):
    """The chaos soak after midnight UTC: the range ended at the new day, past the definition's end, and
    every run of the table failed at launch ('partition key range end ... is after the partitions
    definition end time') until the code location reloaded."""
    [request] = _requests(monkeypatch, ["2026-11-25", "2026-11-27"])
    assert ASSET_PARTITION_RANGE_END_TAG not in request.tags and request.partition_key is None
    [single] = _requests(monkeypatch, ["2026-11-27"])
    assert single.partition_key is None
