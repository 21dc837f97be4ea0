"""manage_restore_points on a real small pyiceberg table (SQL catalog over SQLite, no Spark): the daily
tag once per day, tags past max_age_days removed (others' tags and branches left alone, and an
operator's or a legacy tag sharing the prefix: only the tags the op made and recorded), the
before-rewrite tag named after the run, the section off never acting, and what the tags hold shown
by health."""

from datetime import UTC, datetime

import pyarrow as pa
import pytest

from icelake_assets.catalog.connection import TableRef, open_catalog
from icelake_assets.health.stats import compute_table_stats
from icelake_assets.maintenance.ops.chain import op_named
from icelake_assets.maintenance.ops.restore_points import manage_restore_points
from icelake_assets.planning.health import evaluate
from icelake_assets.planning.restore_points import decide_restore_points, plan_restore_points
from icelake_assets.settings import Policy
from icelake_assets_tests.conftest import TEST_THRESHOLDS, catalog_name, new_lake

DAY = 86_400.0
NOW = datetime(2031, 3, 12, 15, 0, tzinfo=UTC).timestamp()  # Wednesday, ISO week 2031-W11
RECORD = "icelake-restore-point."  # the table property recording a tag the op made (its snapshot id)


def _rows(start: int, n: int = 5) -> pa.Table:
    return pa.table({"id": pa.array(range(start, start + n), pa.int64())})


@pytest.fixture
def lake(tmp_path_factory):
    settings = new_lake(tmp_path_factory, TEST_THRESHOLDS)
    cat = open_catalog(settings, catalog_name(settings), create=True)
    cat.create_namespace("ns")
    table = cat.create_table(("ns", "t"), _rows(0).schema)
    table.append(_rows(0))
    table.append(_rows(100))
    return TableRef(catalog_name(settings), "ns", "t"), table


def _policy(**restore_points) -> Policy:
    return Policy.model_validate({**TEST_THRESHOLDS, "restore_points": restore_points})


def _run(ref, table, policy, now, run_id=""):
    stats_fn = lambda t: compute_table_stats(t, policy, now=now)  # noqa: E731
    return manage_restore_points(lambda: None, ref, table, policy, stats_fn, run_id=run_id)


def _tags(table) -> dict[str, int]:
    table.refresh()
    return {n: r.snapshot_id for n, r in table.metadata.refs.items() if n != "main"}


def test_the_daily_tag_once_per_day_and_old_ones_removed(lake):
    ref, table = lake
    policy = _policy(every="daily", max_age_days=7)
    first = table.metadata.snapshots[0].snapshot_id
    # An old restore point of ours (made by the op), another tool's tag and a branch.
    assert _run(ref, table, policy, NOW - 11 * DAY).created == ("icelake-daily-2031-03-01",)
    table.manage_snapshots().create_tag(first, "nightly-backup").create_branch(
        first, "icelake-branch"
    ).commit()
    current = table.current_snapshot().snapshot_id

    res = _run(ref, table, policy, NOW)
    assert res.acted and res.created == ("icelake-daily-2031-03-12",)
    assert res.removed == ("icelake-daily-2031-03-01",)  # 11 days old > 7
    assert _tags(table) == {
        "icelake-daily-2031-03-12": current,
        "nightly-backup": first,
        "icelake-branch": first,
    }
    assert res.details()["tagged_snapshot"] == current and res.restore_points_after == 1

    # Later the same day: nothing due, whatever was written meanwhile.
    table.append(_rows(200))
    again = _run(ref, table, policy, NOW + 3600)
    assert not again.acted and "none due" in again.reason
    assert set(_tags(table)) == {"icelake-daily-2031-03-12", "nightly-backup", "icelake-branch"}

    # The next day: a new tag, on the new current snapshot; the previous one stays (1 day old).
    nxt = _run(ref, table, policy, NOW + DAY)
    assert nxt.created == ("icelake-daily-2031-03-13",) and nxt.removed == ()
    assert _tags(table)["icelake-daily-2031-03-13"] == table.current_snapshot().snapshot_id
    effect = op_named("manage_restore_points").judge(nxt, compute_table_stats(table, policy), policy, 0)
    assert effect.effect == "effective"

    # Eight days on: the 03-12 tag is past its age, the 03-13 one is not yet.
    late = _run(ref, table, policy, NOW + 7.3 * DAY)
    assert late.removed == ("icelake-daily-2031-03-12",)
    assert "icelake-daily-2031-03-13" in _tags(table) and "nightly-backup" in _tags(table)


def test_only_the_tags_the_product_made_are_removed(lake):
    ref, table = lake
    policy = _policy(every="daily", max_age_days=7)
    first = table.metadata.snapshots[0].snapshot_id
    # An operator's tag sharing the prefix, and one named as ours but made before the records (or by
    # hand): neither is provably ours, so neither is ever removed (nor its snapshot left to expiry).
    table.manage_snapshots().create_tag(first, "icelake-before-migration").create_tag(
        first, "icelake-daily-2031-02-20"
    ).commit()
    commits = len(table.metadata.metadata_log)
    old = _run(ref, table, policy, NOW - 11 * DAY)
    tagged = table.current_snapshot().snapshot_id
    assert old.created == ("icelake-daily-2031-03-01",) and old.removed == ()
    # The tag and its record land in one metadata commit: no crash leaves our tag unrecorded.
    assert len(table.metadata.metadata_log) == commits + 1
    assert table.properties[RECORD + "icelake-daily-2031-03-01"] == str(tagged)

    table.append(_rows(300))
    res = _run(ref, table, policy, NOW)
    assert res.created == ("icelake-daily-2031-03-12",) and res.removed == ("icelake-daily-2031-03-01",)
    tags = _tags(table)
    assert tags["icelake-before-migration"] == first and tags["icelake-daily-2031-02-20"] == first
    assert RECORD + "icelake-daily-2031-03-01" not in table.properties  # its record went with it
    later = compute_table_stats(table, policy, now=NOW + 30 * DAY)
    assert later.restore_points.made == {"icelake-daily-2031-03-12"} and later.restore_points.tags == 3
    assert plan_restore_points(later, policy).remove == ("icelake-daily-2031-03-12",)


def test_a_tag_an_operator_moved_is_no_longer_ours(lake):
    ref, table = lake
    policy = _policy(every="daily", max_age_days=7)
    _run(ref, table, policy, NOW - 11 * DAY)
    first = table.metadata.snapshots[0].snapshot_id
    # The operator drops our tag and makes one of the same name on another snapshot: theirs now.
    table.manage_snapshots().remove_tag("icelake-daily-2031-03-01").commit()
    table.manage_snapshots().create_tag(first, "icelake-daily-2031-03-01").commit()
    res = _run(ref, table, policy, NOW)
    assert res.removed == () and _tags(table)["icelake-daily-2031-03-01"] == first
    # The stale record went with the op's next commit.
    assert RECORD + "icelake-daily-2031-03-01" not in table.properties


def test_weekly_tags_are_named_by_iso_week(lake):
    ref, table = lake
    res = _run(ref, table, _policy(every="weekly", prefix="rp."), NOW)
    assert res.created == ("rp.weekly-2031-W11",)
    assert not _run(ref, table, _policy(every="weekly", prefix="rp."), NOW + 4 * DAY).acted  # Sunday


def test_a_restore_point_before_a_rewrite_is_named_after_the_run(lake):
    ref, table = lake
    for i in range(12):  # a compaction candidate: many small files
        table.append(_rows(1000 + 10 * i))
    policy = Policy.model_validate(
        {
            **TEST_THRESHOLDS,
            "small_files": {"max_files_per_partition": 4},
            "restore_points": {"before_rewrite": True},
        }
    )
    stats = compute_table_stats(table, policy, now=NOW)
    assert decide_restore_points(stats, policy).act
    assert plan_restore_points(stats, policy).create == ("icelake-run-<run id>",)
    res = _run(ref, table, policy, NOW, run_id="0123456789abcdef")
    assert res.created == ("icelake-run-01234567",)
    assert _tags(table) == {"icelake-run-01234567": table.current_snapshot().snapshot_id}
    # No rewrite due (the compaction is not wanted): no tag.
    calm = Policy.model_validate({**TEST_THRESHOLDS, "restore_points": {"before_rewrite": True}})
    assert not plan_restore_points(compute_table_stats(table, calm, now=NOW), calm, "x").create


def test_the_section_off_never_acts(lake):
    ref, table = lake
    table.manage_snapshots().create_tag(
        table.metadata.snapshots[0].snapshot_id, "icelake-daily-2020-01-01"
    ).commit()
    policy = _policy()  # every: off, before_rewrite: false
    d = decide_restore_points(compute_table_stats(table, policy, now=NOW), policy)
    assert not d.act and d.reason.startswith("restore points off")
    assert not _run(ref, table, policy, NOW).acted and "icelake-daily-2020-01-01" in _tags(table)
    disabled = Policy.model_validate(
        {
            **TEST_THRESHOLDS,
            "restore_points": {"every": "daily"},
            "operations": {"enabled": ["expire_snapshots"]},
        }
    )
    assert (
        "disabled by policy" in decide_restore_points(compute_table_stats(table, disabled), disabled).reason
    )


def test_health_shows_what_the_restore_points_hold(lake):
    ref, table = lake
    policy = _policy(every="daily")
    _run(ref, table, policy, NOW)
    old_files = {f.file.file_path: f.file.file_size_in_bytes for f in table.scan().plan_files()}
    table.overwrite(_rows(500, 3))  # the current snapshot drops the tagged snapshot's files
    stats = compute_table_stats(table, policy, now=NOW + 3600)
    rp = stats.restore_points
    assert (rp.tags, rp.oldest, rp.held_files, rp.held_bytes) == (
        1,
        "icelake-daily-2031-03-12",
        len(old_files),
        sum(old_files.values()),
    )
    finding = evaluate(stats, policy).finding("snapshot_retention")
    assert finding.metrics["restore_points"] == 1
    assert finding.metrics["restore_points_held_bytes"] == sum(old_files.values())
    assert "1 restore points (oldest icelake-daily-2031-03-12" in finding.summary
    # Without tags, nothing is shown.
    assert (
        "restore_points"
        not in evaluate(compute_table_stats(table, _policy(prefix="other-")), policy)
        .finding("snapshot_retention")
        .metrics
    )
