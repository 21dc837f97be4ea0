"""Audit records: validation on construction, and their mirror in real Dagster metadata and run tags."""

import math
from datetime import UTC, datetime
from enum import Enum

import pytest
from dagster import (
    DagsterInstance,
    FloatMetadataValue,
    IntMetadataValue,
    JsonMetadataValue,
    MaterializeResult,
    TextMetadataValue,
    asset,
    materialize,
)
from dagster._utils.tags import is_valid_tag_key

from icelake_assets.audit import AuditRecord, dagster_tags, trigger_from_tags
from icelake_assets.catalog.connection import TableRef
from icelake_assets.orchestration.assets.audit_trail import dagster_metadata


class Color(Enum):
    RED = "red"


def _op_record(**kw) -> AuditRecord:
    base = dict(
        table_name="demo.taxi.trips",
        kind="op",
        decision="acted",
        trigger="sensor",
        op="rewrite_data_files",
        reason="6 partitions over 20 files",
        run_id="run-1",
        signals={"small_files": 180, "avg_file_bytes": 2048.5, "seen_at": datetime(2026, 1, 2, tzinfo=UTC)},
        policy={"small_files": {"max_files_per_partition": 20}, "mode": Color.RED},
        partitions=("pickup_day=2026-01-01", "pickup_day=2026-01-02"),
        partitions_reason="over 20 files each",
        failed_partitions=("pickup_day=2026-01-02",),
        writer_check={"quiet": True, "last_commit_minutes_ago": 42.0},
        cost_estimate_bytes=123_456,
        snapshot_before=2**62 + 1,
        snapshot_after=7,
        duration_s=3,
        results={"rewritten_data_files_count": 180, "sample": {1, 2}},
    )
    return AuditRecord(**{**base, **kw})


def test_json_fields_are_normalized_to_plain_json():
    r = _op_record(signals={"ratio": math.nan, "big": math.inf, "at": datetime(2026, 1, 2, tzinfo=UTC)})
    assert r.signals == {"ratio": "nan", "big": "inf", "at": "2026-01-02T00:00:00+00:00"}
    assert r.policy["mode"] == "red" and r.results["sample"] == [1, 2]
    assert r.duration_s == 3.0 and isinstance(r.duration_s, float)
    assert r.recorded_at.tzinfo is UTC and len(r.record_id) == 32


def test_a_table_ref_is_accepted_and_kept_as_text():
    r = _op_record(table_name=TableRef("demo", ("a", "b"), "t"))
    assert r.table_name == "demo.a.b.t" and r.ref == TableRef("demo", ("a", "b"), "t")


@pytest.mark.parametrize(
    "change, message",
    [
        ({"table_name": "trips"}, "invalid table name 'trips'"),
        ({"table_name": "demo.taxi.tr\nips"}, "invalid table name"),
        ({"kind": "guess"}, "kind must be one of"),
        ({"decision": "launched"}, "kind 'op': decision must be one of"),
        ({"kind": "decision", "decision": "acted"}, "kind 'decision': decision must be one of"),
        ({"trigger": "cron"}, "trigger must be one of"),
        ({"op": None}, "needs the op name"),
        ({"op": "drop table x"}, "op must be a name"),
        ({"recorded_at": datetime(2026, 1, 1)}, "timezone-aware"),
        ({"signals": {"x": object()}}, "field 'signals': object"),
        ({"policy": ["not", "a", "mapping"]}, "policy must be a mapping"),
        ({"partitions": "pickup_day=2026-01-01"}, "partitions must be a sequence"),
        ({"failed_partitions": (1,)}, "failed_partitions must be a sequence"),
        ({"cost_estimate_bytes": -1}, "cost_estimate_bytes must be >= 0"),
        ({"snapshot_before": "12"}, "snapshot_before must be an integer"),
        ({"snapshot_after": True}, "snapshot_after must be an integer"),
        ({"duration_s": -0.5}, "duration_s must be a finite number >= 0"),
        ({"duration_s": math.nan}, "duration_s must be a finite number >= 0"),
        ({"record_id": ""}, "record_id must be a non-empty string"),
    ],
)
def test_bad_values_are_rejected_naming_the_field(change, message):
    with pytest.raises(ValueError, match=message):
        _op_record(**change)


def test_decisions_of_every_kind():
    assert AuditRecord("c.n.t", "decision", "held", "sensor", cost_estimate_bytes=10).op is None
    assert AuditRecord("c.n.t", "validation", "partial", "backfill", op="validate").decision == "partial"
    assert AuditRecord("c.n.t", "rollback", "refused", "manual", rolled_back_to=None).kind == "rollback"


def test_trigger_from_run_tags():
    assert trigger_from_tags({"dagster/sensor_name": "icelake_health"}) == "sensor"
    assert trigger_from_tags({"dagster/backfill": "abc", "dagster/sensor_name": "x"}) == "backfill"
    assert trigger_from_tags({"dagster/schedule_name": "nightly"}) == "schedule"
    assert trigger_from_tags({}) == "manual"


def test_metadata_types_and_absent_fields():
    md = dagster_metadata(_op_record())
    assert isinstance(md["audit/rewrite_data_files/snapshot_before"], IntMetadataValue)
    assert md["audit/rewrite_data_files/snapshot_before"].value == 2**62 + 1
    assert isinstance(md["audit/rewrite_data_files/signals"], JsonMetadataValue)
    assert isinstance(md["audit/rewrite_data_files/duration_s"], FloatMetadataValue)
    assert md["audit/rewrite_data_files/partition_count"].value == 2
    assert md["audit/rewrite_data_files/failed_partition_count"].value == 1
    held = dagster_metadata(AuditRecord("c.n.t", "decision", "held", "sensor"), prefix="")
    assert (
        isinstance(held["decision"], TextMetadataValue)
        and "snapshot_before" not in held
        and "signals" not in held
    )


def test_metadata_and_tags_round_trip_through_a_real_dagster_instance():
    record = _op_record()

    @asset
    def audited() -> MaterializeResult:
        return MaterializeResult(metadata=dagster_metadata(record))

    instance = DagsterInstance.ephemeral()
    result = materialize([audited], instance=instance, tags=dagster_tags(record))
    assert result.success
    md = result.get_asset_materialization_events()[0].materialization.metadata
    assert md["audit/rewrite_data_files/decision"].value == "acted"
    assert md["audit/rewrite_data_files/snapshot_before"].value == 2**62 + 1
    assert md["audit/rewrite_data_files/writer_check"].value == {
        "quiet": True,
        "last_commit_minutes_ago": 42.0,
    }
    tags = instance.get_run_by_id(result.run_id).tags
    assert tags["icelake/decision"] == "acted" and tags["icelake/trigger"] == "sensor"
    assert tags["icelake/signal.small_files"] == "180" and tags["icelake/snapshot_before"] == str(2**62 + 1)
    assert tags["icelake/audit_record"] == record.record_id
    assert all(is_valid_tag_key(k) for k in dagster_tags(record))


def test_long_tag_values_are_cut_and_odd_signal_names_made_valid():
    tags = dagster_tags(
        _op_record(reason="x" * 1000, signals={"weird name/with:chars": 1, "nested": {"a": 1}})
    )
    assert len(tags["icelake/reason"]) == 255
    assert tags["icelake/signal.weird_name_with_chars"] == "1"
    assert "icelake/signal.nested" not in tags  # only scalar signals become tags
    assert all(is_valid_tag_key(k) for k in tags)
