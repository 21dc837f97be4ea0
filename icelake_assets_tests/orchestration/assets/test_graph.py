"""The maintenance materialization's metadata: a summary for people first, numbers for plots under
short keys, and a run that did nothing saying so and pointing to the last run that acted.

Pure functions over plain data plus a real (ephemeral) Dagster instance; the end-to-end run through
Spark is in test_maintenance_run.py."""

from types import SimpleNamespace

from dagster import AssetKey, AssetMaterialization, DagsterInstance, FloatMetadataValue, IntMetadataValue

from icelake_assets.maintenance.results.codec import RESULT_CLASSES
from icelake_assets.maintenance.results.effect import OpEffect
from icelake_assets.maintenance.results.models import OpResult
from icelake_assets.maintenance.verify.validation import ValidationResult
from icelake_assets.orchestration.assets.run_metadata import LastEffective, last_effective_run, run_metadata
from icelake_assets.orchestration.assets.run_state import RunState
from icelake_assets.orchestration.display import human_bytes, human_duration

BEFORE = {
    "data_files": 180,
    "small_files": 180,
    "snapshots": 30,
    "manifests": 30,
    "records": 1800,
    "data_bytes": 16_118_266,
    "delete_files": 0,
}
AFTER = SimpleNamespace(
    data_files=6,
    small_files=0,
    snapshots=7,
    manifests=1,
    records=1800,
    data_bytes=15_000_000,
    position_delete_files=0,
    equality_delete_files=0,
)
# The after-stats stand-in answers summary() as TableStats does (same measures, from the fields above).
AFTER.summary = lambda: {
    "data_files": 6,
    "small_files": 0,
    "snapshots": 7,
    "manifests": 1,
    "records": 1800,
    "data_bytes": 15_000_000,
    "delete_files": 0,
}
POLICY = SimpleNamespace(small_files=SimpleNamespace(partial_progress_max_commits=10))
HEALTH = SimpleNamespace(score=SimpleNamespace(score=100), status=SimpleNamespace(value="Healthy"))


def _op(name: str, acted: bool, reason: str, duration: float, **fields) -> OpResult:
    """An op result as an op returns it, typed."""
    return RESULT_CLASSES[name](
        acted=acted,
        reason=reason,
        duration_s=duration,
        snapshot_before=1,
        snapshot_after=2 if acted else 1,
        **fields,
    )


def _validation(rows: int = 1800, same: bool = False) -> ValidationResult:
    return ValidationResult(1, 1 if same else 2, rows, rows, rows, 0, 0 if same else 2)


def _acting_state() -> RunState:
    return RunState(
        table="c.ns.t",
        before_snapshot_id=1,
        before=BEFORE,
        ops=(
            _op(
                "expire_snapshots",
                True,
                "30 snapshots > 20",
                8.729,
                snapshots_expired=25,
                snapshots_before=30,
                snapshots_after=5,
            ),
            _op("remove_orphan_files", False, "0 orphan files older than 72 h ≤ 0", 0.144),
            _op(
                "rewrite_data_files",
                True,
                "6 partitions with > 20 small files",
                125.3,
                procedure={
                    "rewritten_data_files_count": 180,
                    "added_data_files_count": 6,
                    "rewritten_bytes_count": 16_118_266,
                },
                failed_data_files_count=0,
                partitions_rewritten=("d=1", "d=2"),
            ),
            _op(
                "rewrite_manifests",
                True,
                "31 manifests > 10",
                3.882,
                procedure={"rewritten_manifests_count": 31, "added_manifests_count": 1},
            ),
        ),
    )


def _noop_state() -> RunState:
    return RunState(
        table="c.ns.t",
        before_snapshot_id=1,
        before=BEFORE,
        ops=tuple(
            _op(name, False, f"{name} below its threshold", 0.01)
            for name in ("expire_snapshots", "remove_orphan_files", "rewrite_data_files", "rewrite_manifests")
        ),
    )


def test_an_acting_run_shows_what_it_did_in_human_units_and_keeps_the_numbers_for_plots():
    effects = [
        OpEffect("expire_snapshots", "effective", "ok"),
        OpEffect("rewrite_data_files", "effective", "ok"),
        OpEffect("rewrite_manifests", "ineffective", "still 12 manifests"),
    ]
    md = run_metadata(_acting_state(), AFTER, _validation(), effects, "ineffective", HEALTH, POLICY, None)
    assert list(md)[0] == "summary"
    summary = md["summary"].value
    assert len(summary) < 1000  # the UI shows markdown under 1000 characters inline
    lines = summary.split("\n")
    assert lines[0] == "**3 of 4 ops acted** · ineffective · 2m18s"
    assert "| rewrite_data_files | 180 → 6 data files (16.1 MB rewritten) | effective | 2m5s |" in lines
    assert "| remove_orphan_files | skipped: 0 orphan files older than 72 h ≤ 0 |  | 144ms |" in lines
    # Each number names what it counts: the manifest op's own count beside the run's whole change.
    assert "| rewrite_manifests | 31 → 1 manifests rewritten | ineffective | 3.88s |" in lines
    assert "- 30 → 1 manifests in the current snapshot" in lines
    assert "- 16.1 MB → 15.0 MB of data" in lines and "16118266" not in summary
    assert max(len(line) for line in lines) <= 85  # short lines: a narrow metadata column cuts long ones
    assert md["change"].value == (
        "expire_snapshots: 25 of 30 snapshots expired; rewrite_data_files: 180 → 6 data files (16.1 MB "
        "rewritten); rewrite_manifests: 31 → 1 manifests rewritten; table, start → end of run: "
        "180 → 6 data files, 30 → 7 snapshots, 30 → 1 manifests in the current snapshot, "
        "16.1 MB → 15.0 MB of data"
    )
    # The numbers stay numbers, under short grouped keys.
    assert isinstance(md["bytes/rewritten"], IntMetadataValue) and md["bytes/rewritten"].value == 16_118_266
    assert md["files/before"].value == 180 and md["files/after"].value == 6
    assert isinstance(md["time/rewrite"], FloatMetadataValue) and md["time/rewrite"].value == 125.3
    assert human_duration(md["time/rewrite"].value) == "2m5s"
    assert human_bytes(md["bytes/before"].value) == "16.1 MB"
    assert md["partitions/rewritten"].value == 2 and md["partitions/rewritten_keys"].value == ["d=1", "d=2"]
    assert md["effect/manifests"].value == "ineffective: still 12 manifests"
    assert md["ops/ineffective"].value == 1
    assert md["why/orphans"].value == "skipped: 0 orphan files older than 72 h ≤ 0"
    assert "last_effective_run" not in md
    assert max(len(k) for k in md) <= 25


def test_a_run_where_nothing_acted_says_so_and_points_to_the_last_run_that_did():
    last = LastEffective("0f1e2d3c-aaaa-bbbb-cccc-000000000001", 1_795_462_189.0, "data files 180 → 6")
    md = run_metadata(_noop_state(), AFTER, _validation(same=True), [], None, HEALTH, POLICY, last)
    summary = md["summary"].value
    assert summary.startswith(
        "**Nothing to do** · 40ms\n\n- expire_snapshots: expire_snapshots below its threshold\n"
        "- remove_orphan_files: "
    )
    assert max(len(line) for line in summary.split("\n")) <= 140  # the link's target is not shown
    assert f"Last run that acted: [0f1e2d3c](/runs/{last.run_id}), 2026-11-23 " in summary
    assert md["outcome"].value == "nothing to do" and md["ops/acted"].value == "none"
    assert md["last_effective_run"].value == last.run_id and md["last_effective_at"].value == last.at
    assert md["last_effective_change"].value == "data files 180 → 6"
    # No before/after pair that reads like a change; the table's state is still plotted.
    assert not [k for k in md if k.endswith("/before")] and "change" not in md
    assert md["files/after"].value == 6 and md["rows/after"].value == 1800


def test_the_last_run_that_acted_is_found_through_the_runs_that_did_nothing():
    instance = DagsterInstance.ephemeral()
    key = AssetKey(["lake", "ns", "t"])
    assert last_effective_run(instance, key) is None

    def report(metadata: dict) -> None:
        instance.report_runless_asset_event(AssetMaterialization(key, metadata=metadata))

    report({"ops/acted": "rewrite_data_files", "change": "data files 180 → 6"})
    acted = instance.fetch_materializations(key, limit=1).records[0]
    found = last_effective_run(instance, key)
    assert found == LastEffective(acted.run_id, acted.timestamp, "data files 180 → 6")
    # A run that did nothing records it; the next one finds it there (a chain, however many runs back).
    md = run_metadata(_noop_state(), AFTER, _validation(same=True), [], None, HEALTH, POLICY, found)
    report({k: v for k, v in md.items()})
    assert last_effective_run(instance, key) == found
    # Materializations recorded before the keys were renamed (ops_acted) still count.
    report({"ops_acted": "expire_snapshots"})
    legacy = instance.fetch_materializations(key, limit=1).records[0]
    assert last_effective_run(instance, key) == LastEffective(legacy.run_id, legacy.timestamp, "")
