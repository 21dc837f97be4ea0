"""Health per partition as Dagster asset checks, on a real lake (SQLite catalog, pyiceberg) and a real
Dagster instance: a partitioned table's asset carries ``<check>_by_partition`` checks partitioned like
it; a run of some partitions reports those, a run without a partition every one, each naming its
partition and the materialization its result counts for (so the UI keeps showing it after
maintenance); the report job reports any partition again; the checks jobs leave them out."""

from __future__ import annotations

from pathlib import Path

import pytest
from dagster import (
    AssetCheckKey,
    AssetCheckSeverity,
    AssetMaterialization,
    AssetSelection,
    DagsterInstance,
    Definitions,
    define_asset_job,
)

from icelake_assets.orchestration.checks.asset_checks import CHECKS_JOB, HEALTH_JOB
from icelake_assets.orchestration.checks.partition_checks import (
    PARTITION_CHECK_NAMES,
    partition_check_definitions,
    partition_checks_enabled,
    partitioned_checks_supported,
)
from icelake_assets.orchestration.checks.partition_report_job import (
    PARTITION_REPORT_JOB,
    REPORT_OP,
)
from icelake_assets.orchestration.names import table_asset_key
from icelake_assets.orchestration.project import build_definitions
from icelake_assets.orchestration.resources import IcelakeResource
from icelake_assets.orchestration.tables.table_groups import group_tables
from icelake_assets.types import TableRef
from icelake_assets_tests.operate.test_partition_health import degraded_lake

DAYS = [f"2024-03-0{d}" for d in range(1, 7)]
FAILING = ["2024-03-02", "2024-03-05"]  # 7 small files each, max 5 per partition
NAMES = sorted(PARTITION_CHECK_NAMES.values())


@pytest.fixture(scope="module")
def lake(tmp_path_factory):
    settings, days, flat = degraded_lake(tmp_path_factory)
    defs = build_definitions(settings)
    key = table_asset_key(TableRef.parse(days))
    checks = [AssetCheckKey(key, n) for n in NAMES]
    # The partition checks alone, as the UI's "Execute" of a check over some partitions runs them (a
    # maintenance run's would run Spark first). Its runs name their partition by tag, as Dagster's do.
    runner = Definitions.merge(
        defs, Definitions(jobs=[define_asset_job("pc", AssetSelection.checks(*checks))])
    )
    return settings, days, flat, defs, runner, key


def _by_partition(result) -> dict[tuple[str, str], object]:
    return {(e.partition, e.check_name): e for e in result.get_asset_check_evaluations()}


def _statuses(instance: DagsterInstance, key, pdef) -> dict[str, list[str]]:
    """What the UI shows per partition of small_files_by_partition (Dagster's check state)."""
    check = AssetCheckKey(key, PARTITION_CHECK_NAMES["small_files"])
    state = instance.event_log_storage.get_asset_check_state([(check, pdef)])[check]
    return {
        s.value: sorted(subset.subset_value.get_partition_keys())
        for s, subset in state.subsets.items()
        if s.value in ("SUCCEEDED", "FAILED") and not subset.is_empty
    }


def test_a_partitioned_table_carries_the_checks_per_partition_and_the_checks_jobs_leave_them_out(lake):
    settings, days, flat, defs, _, key = lake
    graph = defs.resolve_asset_graph()
    pdef = graph.get(key).partitions_def
    assert pdef is not None
    for name in NAMES:
        assert graph.get(AssetCheckKey(key, name)).partitions_def == pdef  # Dagster requires the asset's
    flat_key = table_asset_key(TableRef.parse(flat))
    assert not any(
        k.name.endswith("_by_partition") for k in graph.asset_check_keys if k.asset_key == flat_key
    )
    for job in (CHECKS_JOB, HEALTH_JOB):  # unpartitioned runs over tables of every partitions definition
        selected = defs.resolve_job_def(job).asset_layer.asset_graph.asset_check_keys
        assert not any(k.name.endswith("_by_partition") for k in selected)
    assert defs.resolve_job_def(PARTITION_REPORT_JOB) is not None

    # automation.partition_checks: auto follows the installed Dagster (which has them); off: none.
    assert (
        partitioned_checks_supported() and partition_checks_enabled("auto") and partition_checks_enabled("on")
    )
    assert not partition_checks_enabled("off")
    from icelake_assets.catalog.discovery import discover_lake

    groups = group_tables(discover_lake(settings).tables, settings.automation.maintenance_pools)
    assert partition_check_definitions(groups, enabled=False) == []
    assert len(partition_check_definitions(groups, enabled=True)) == 1


def test_a_run_reports_its_partitions_and_a_whole_table_run_every_one_and_the_ui_keeps_them(lake):
    _, days, _, defs, runner, key = lake
    pdef = defs.resolve_asset_graph().get(key).partitions_def
    icelake = {"icelake": IcelakeResource(config_path=lake[0].source)}
    with DagsterInstance.ephemeral() as instance:
        # A maintenance run of 2024-03-02 left a materialization of that partition.
        instance.report_runless_asset_event(AssetMaterialization(key, partition="2024-03-02"))
        one = runner.resolve_job_def("pc").execute_in_process(
            instance=instance, tags={"dagster/partition": "2024-03-02"}, resources=icelake
        )
        found = _by_partition(one)
        assert set(found) == {("2024-03-02", n) for n in NAMES}
        small = found[("2024-03-02", "small_files_by_partition")]
        assert not small.passed and small.severity is AssetCheckSeverity.WARN
        md = small.metadata
        assert (md["data_files"].value, md["small_files"].value, md["max_files_per_partition"].value) == (
            7,
            7,
            5,
        )
        assert md["avg_file_bytes"].value > 0 and md["iceberg_partitions"].value == "ts_day=2024-03-02"
        assert md["backfill"].value == f"icelake backfill {days} --unhealthy --check small_files"
        assert small.description.startswith("2024-03-02: 7 files averaging")
        assert found[("2024-03-02", "delete_files_by_partition")].passed
        assert found[("2024-03-02", "delete_files_by_partition")].metadata["max_file_ratio"].value > 0
        # It names the partition's materialization: the UI shows it, not a blank "not evaluated".
        assert _statuses(instance, key, pdef) == {"FAILED": ["2024-03-02"]}

        ranged = runner.resolve_job_def("pc").execute_in_process(
            instance=instance,
            resources=icelake,
            tags={
                "dagster/asset_partition_range_start": "2024-03-03",
                "dagster/asset_partition_range_end": "2024-03-05",
            },
        )
        assert {p for p, _ in _by_partition(ranged)} == {"2024-03-03", "2024-03-04", "2024-03-05"}
        assert _statuses(instance, key, pdef) == {
            "FAILED": FAILING,
            "SUCCEEDED": ["2024-03-03", "2024-03-04"],
        }

        # A whole-table run's materialization (no partition) clears every partition's status in Dagster
        # ... and its checks report every partition again, naming it.
        instance.report_runless_asset_event(AssetMaterialization(key))
        assert _statuses(instance, key, pdef) == {}
        whole = runner.resolve_job_def("pc").execute_in_process(instance=instance, resources=icelake)
        assert set(_by_partition(whole)) == {(d, n) for d in DAYS for n in NAMES}
        failing = sorted(p for (p, n), e in _by_partition(whole).items() if not e.passed)
        assert failing == FAILING  # small_files only: no deletes, no drift
        assert _statuses(instance, key, pdef) == {
            "FAILED": FAILING,
            "SUCCEEDED": [d for d in DAYS if d not in FAILING],
        }


def test_the_report_job_reports_a_partition_again_and_a_key_without_files_as_passing(lake):
    settings, days, _, defs, _, key = lake
    pdef = defs.resolve_asset_graph().get(key).partitions_def
    job = defs.resolve_job_def(PARTITION_REPORT_JOB)
    config = {"ops": {REPORT_OP: {"config": {"tables": {days: ["2024-03-05", "2024-03-06"]}}}}}
    with DagsterInstance.ephemeral() as instance:
        for _ in range(2):  # twice: a run-less evaluation could not report a partition a second time
            result = job.execute_in_process(instance=instance, run_config=config)
            assert result.success
            found = _by_partition(result)
            assert set(found) == {(d, n) for d in ("2024-03-05", "2024-03-06") for n in NAMES}
            assert not found[("2024-03-05", "small_files_by_partition")].passed
        assert _statuses(instance, key, pdef) == {"FAILED": ["2024-03-05"], "SUCCEEDED": ["2024-03-06"]}

        missing = f"{days.rsplit('.', 1)[0]}.nope"
        config = {"ops": {REPORT_OP: {"config": {"tables": {days: ["2024-03-01"], missing: ["2024-03-01"]}}}}}
        result = job.execute_in_process(instance=instance, run_config=config, raise_on_error=False)
        assert not result.success and {p for p, _ in _by_partition(result)} == {"2024-03-01"}
        [failure] = [e for e in result.all_events if e.is_step_failure]
        assert "nope" in failure.step_failure_data.error.message

        # A maintenance run in progress planned 2024-03-05's checks: it reports that partition once it
        # maintained it (its planned row, older than a report written now, would not be the latest).
        maintenance = _started_run_planning(instance, key, "2024-03-05")
        config = {"ops": {REPORT_OP: {"config": {"tables": {days: ["2024-03-05", "2024-03-06"]}}}}}
        during = job.execute_in_process(instance=instance, run_config=config)
        assert during.success and {p for p, _ in _by_partition(during)} == {"2024-03-06"}
        instance.report_run_failed(maintenance)  # it ended: the report writes the partition again
        after = job.execute_in_process(instance=instance, run_config=config)
        assert {p for p, _ in _by_partition(after)} == {"2024-03-05", "2024-03-06"}


def _started_run_planning(instance: DagsterInstance, key, partition: str):
    """A run in progress that planned the partition's checks, as a maintenance run does at its start."""
    from dagster import DagsterEvent, DagsterEventType, DagsterRun, DagsterRunStatus
    from dagster._core.definitions.asset_checks.asset_check_evaluation import AssetCheckEvaluationPlanned
    from dagster._core.definitions.partitions.subset import DefaultPartitionsSubset
    from dagster._core.utils import make_new_run_id

    run = instance.add_run(
        DagsterRun(job_name="__ASSET_JOB", run_id=make_new_run_id(), status=DagsterRunStatus.STARTED)
    )
    for name in NAMES:
        planned = AssetCheckEvaluationPlanned(
            asset_key=key, check_name=name, partitions_subset=DefaultPartitionsSubset({partition})
        )
        event = DagsterEvent(
            event_type_value=DagsterEventType.ASSET_CHECK_EVALUATION_PLANNED.value,
            job_name=run.job_name,
            event_specific_data=planned,
        )
        instance.report_dagster_event(event, run.run_id)
    return run


def test_dagster_still_refuses_a_second_run_less_evaluation_of_a_partition():
    """Why the sensor asks for a run (checks/partition_checks.py): Dagster 1.13 stores run-less check
    evaluations under an empty run id, unique per partition. When this fails, Dagster reports them
    more than once, and the sensor could report partitions itself."""
    from dagster import AssetCheckEvaluation, AssetKey

    with DagsterInstance.ephemeral() as instance:
        evaluation = AssetCheckEvaluation(asset_key=AssetKey("t"), check_name="c", passed=True, partition="p")
        instance.report_runless_asset_event(evaluation)
        with pytest.raises(Exception, match="UNIQUE constraint failed"):
            instance.report_runless_asset_event(evaluation)


def test_a_maintenance_run_of_a_failing_partition_reports_it_healed(tmp_path_factory):
    """End to end (Spark): the run of 2024-03-02 compacts its 8 files, materializes that partition,
    and its checks report the partition passing, naming that materialization (what the UI shows after
    ``icelake backfill``); the other failing day stays failing, unreported by this run."""
    settings, days, _ = degraded_lake(tmp_path_factory)
    defs = build_definitions(settings)
    key = table_asset_key(TableRef.parse(days))
    pdef = defs.resolve_asset_graph().get(key).partitions_def
    with DagsterInstance.ephemeral() as instance:
        job = defs.resolve_implicit_job_def_def_for_assets([key])
        result = job.execute_in_process(instance=instance, asset_selection=[key], partition_key="2024-03-02")
        assert result.success
        assert [e.materialization.partition for e in result.get_asset_materialization_events()] == [
            "2024-03-02"
        ]
        found = {(p, n): e for (p, n), e in _by_partition(result).items() if n in NAMES}
        assert set(found) == {("2024-03-02", n) for n in NAMES}  # and the table-level checks, unpartitioned
        small = found[("2024-03-02", "small_files_by_partition")]
        assert small.passed and small.metadata["data_files"].value == 1
        assert _statuses(instance, key, pdef) == {"SUCCEEDED": ["2024-03-02"]}


def test_partition_checks_off_in_the_settings_leaves_every_table_its_table_level_checks(lake):
    import yaml

    from icelake_assets.settings import load_settings

    settings, *_, key = lake
    data = yaml.safe_load(Path(settings.source).read_text())
    data.setdefault("automation", {})["partition_checks"] = "off"
    off = Path(settings.source).with_name("icelake-off.yaml")
    off.write_text(yaml.safe_dump(data))
    graph = build_definitions(load_settings(off)).resolve_asset_graph()
    names = {k.name for k in graph.asset_check_keys if k.asset_key == key}
    assert "small_files" in names and not any(n.endswith("_by_partition") for n in names)
