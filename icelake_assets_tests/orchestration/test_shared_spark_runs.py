"""Maintenance runs in separate processes (as Dagster's run workers are) share one Spark driver
(``spark.session: shared``): the first run starts it, the next attaches; each run still validates
and audits its own tables, and the lake ends healed."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import yaml
from dagster import DagsterInstance, DagsterRunStatus

from icelake_assets.catalog.connection import load_table, open_catalog
from icelake_assets.demo.lake import build_demo_lake
from icelake_assets.health.stats import compute_table_stats
from icelake_assets.maintenance.spark.resident_spark import stop_all
from icelake_assets.orchestration.project import build_definitions, maintenance_job_names
from icelake_assets.planning.table import op_decisions
from icelake_assets.policies import policy_for
from icelake_assets.settings import load_settings
from icelake_assets_tests.conftest import catalog_name

RUN_JOB = """
import sys
from dagster import DagsterInstance
from icelake_assets.orchestration.project import build_definitions
from icelake_assets.settings import load_settings
defs = build_definitions(load_settings(sys.argv[1]))
result = defs.resolve_job_def(sys.argv[2]).execute_in_process(instance=DagsterInstance.get())
sys.exit(0 if result.success else 1)
"""


def test_two_runs_in_two_processes_share_one_spark_driver(make_lake, tmp_path):
    settings = make_lake()
    assert settings.source is not None
    path = Path(settings.source)
    data = yaml.safe_load(path.read_text())
    data["spark"] = {"session": "shared", "idle_minutes": 5}
    path.write_text(yaml.safe_dump(data))
    name = catalog_name(settings)
    refs = build_demo_lake(settings, catalog=name, scale="test")
    settings = load_settings(path)
    jobs = maintenance_job_names(build_definitions(settings))
    assert len(jobs) >= 2  # the unpartitioned tables' job and a partitioned table's own
    home = tmp_path / "dagster_home"
    home.mkdir()
    env = {**os.environ, "DAGSTER_HOME": str(home), "ICELAKE_SPARK_SESSION": ""}
    try:
        for job in jobs[:2]:
            proc = subprocess.run(
                [sys.executable, "-c", RUN_JOB, str(path), job],
                env=env,
                capture_output=True,
                text=True,
                timeout=900,
                cwd=path.parent,
            )
            assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    finally:
        stopped = stop_all(home / "icelake" / "spark")
    assert stopped == 1  # one resident driver served both runs, and is stopped by its PID
    instance = DagsterInstance.from_config(str(home))
    runs = list(reversed(instance.get_runs()))  # oldest first
    assert [r.status for r in runs] == [DagsterRunStatus.SUCCESS] * 2
    said = [
        next(e.user_message for e in instance.all_logs(r.run_id) if e.user_message.startswith("Spark: "))
        for r in runs
    ]
    assert said[0].startswith("Spark: started the shared driver"), said
    assert said[1].startswith("Spark: attached to the shared driver"), said
    pids = {re.search(r"\(PID (\d+)\)", s).group(1) for s in said}  # type: ignore[union-attr]
    assert len(pids) == 1
    # Healed as a run with its own driver heals: no maintenance op would act on any table.
    catalog = open_catalog(settings, name)
    for ref in refs:
        table = load_table(catalog, ref)
        policy = policy_for(settings, ref, table.properties)
        decisions = op_decisions(compute_table_stats(table, policy), policy, None)
        assert not [d for d in decisions if d.act], (ref, decisions)
