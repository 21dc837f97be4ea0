"""`icelake backfill TABLE --unhealthy` on a real lake (SQLite catalog, pyiceberg): the dry run names
exactly the partitions that fail, with their checks, and launches nothing; nothing unhealthy exits 0
saying so; an unknown table or check, or an unpartitioned table, exits 2 naming why. Then the launch
against a real Dagster webserver (the product's own code location, no daemon): one backfill in the
instance, of the table's asset, whose partitions are exactly the failing keys."""

from __future__ import annotations

import json

import pytest
from dagster import DagsterInstance

from icelake_assets.cli import main
from icelake_assets_tests.dagster_webserver import dagster_webserver
from icelake_assets_tests.operate.test_partition_health import degraded_lake
from icelake_assets_tests.servers import free_port

FAILING = ["2024-03-02", "2024-03-05"]  # 7 small files each, max 5 per partition
DOC_KEYS = {
    "schema",
    "table",
    "asset_key",
    "check",
    "checks",
    "snapshot_id",
    "partitions_evaluated",
    "keys",
    "partitions",
    "keyless_unhealthy",
    "partitions_per_run",
    "max_runs",
    "dry_run",
    "backfill_id",
    "backfill_url",
    "dagster_url",
}

pytestmark = pytest.mark.timeout(400)


@pytest.fixture(scope="module")
def lake(tmp_path_factory):
    return degraded_lake(tmp_path_factory)


def _backfill(settings, table: str, *extra: str) -> int:
    return main(["--config", settings.source, "backfill", table, "--unhealthy", *extra])


def test_the_dry_run_names_exactly_the_failing_partitions_and_launches_nothing(lake, capsys):
    settings, days, _ = lake
    down = f"http://127.0.0.1:{free_port()}"  # nothing is asked of a webserver
    assert _backfill(settings, days, "--dry-run", "--json", "--dagster-url", down) == 0
    doc = json.loads(capsys.readouterr().out)
    assert set(doc) == DOC_KEYS and doc["schema"] == "icelake.backfill/v1"
    assert (doc["table"], doc["check"], doc["dry_run"], doc["backfill_id"]) == (days, None, True, None)
    assert doc["asset_key"] == days.split(".") and doc["partitions_evaluated"] == 6
    assert doc["keys"] == FAILING and doc["keyless_unhealthy"] == []
    assert doc["partitions"] == [{"key": k, "failing": ["small_files"]} for k in FAILING]
    assert (doc["partitions_per_run"], doc["max_runs"]) == (10, 1)

    assert _backfill(settings, days, "--check", "small_files", "--dry-run") == 0
    out = capsys.readouterr().out
    assert f"2 of 6 partitions of {days} fail small_files: 2024-03-02, 2024-03-05" in out
    assert "dry run: nothing launched" in out and "at most 1 run(s)" in out


def test_nothing_unhealthy_exits_0_and_bad_names_exit_2(lake, capsys):
    settings, days, flat = lake
    assert _backfill(settings, days, "--check", "delete_files") == 0  # nothing to launch: no webserver asked
    assert f"no partition of {days} fails delete_files: nothing to backfill" in capsys.readouterr().out
    assert _backfill(settings, days, "--check", "delete_files", "--json") == 0
    assert json.loads(capsys.readouterr().out)["keys"] == []

    assert _backfill(settings, days, "--check", "snapshot_retention") == 2
    assert "snapshot_retention is a table-level check" in capsys.readouterr().err
    assert _backfill(settings, days, "--check", "smal_files") == 2
    err = capsys.readouterr().err
    assert "unknown check 'smal_files'" in err and "small_files, delete_files, layout_drift" in err
    assert _backfill(settings, days.rsplit(".", 1)[0] + ".nope") == 2
    assert "nope does not exist" in capsys.readouterr().err
    assert _backfill(settings, flat) == 2
    assert f"{flat} is not partitioned" in capsys.readouterr().err
    down = f"http://127.0.0.1:{free_port()}"
    assert _backfill(settings, days, "--dagster-url", down) == 2
    assert f"the Dagster webserver at {down} does not answer" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exited:  # --unhealthy is the selection: required
        main(["--config", settings.source, "backfill", days])
    assert exited.value.code == 2


@pytest.fixture
def webserver(lake, tmp_path):
    """`dagster-webserver` (no daemon) serving the lake's code location, its instance in ``home``."""
    settings, days, _ = lake
    with dagster_webserver(settings, tmp_path) as (url, home):
        yield settings, days, url, home


def test_a_launch_creates_one_backfill_of_exactly_the_failing_keys(webserver, capsys):
    settings, days, url, home = webserver
    assert _backfill(settings, days, "--dagster-url", url, "--json") == 0, capsys.readouterr().err
    doc = json.loads(capsys.readouterr().out)
    assert doc["dry_run"] is False and doc["keys"] == FAILING
    assert doc["backfill_url"] == f"{url}/runs/b/{doc['backfill_id']}"

    with DagsterInstance.from_config(str(home)) as instance:
        [backfill] = instance.get_backfills()
    assert backfill.backfill_id == doc["backfill_id"] and backfill.is_asset_backfill
    assert [k.to_user_string() for k in backfill.asset_selection or ()] == [days.replace(".", "/")]
    target = backfill.asset_backfill_data.target_subset
    assert sorted(p.partition_key for p in target.iterate_asset_partitions()) == FAILING
    assert backfill.tags["icelake/table"] == days and backfill.tags["icelake/trigger"] == "manual"
    assert backfill.title == f"unhealthy partitions of {days}"


def test_keys_are_written_as_the_uis_partition_selection_reads_them():
    from icelake_assets.operate.backfill import ui_key

    assert ui_key("2024-03-02") == "2024-03-02" and ui_key("2024-03-02-05") == "2024-03-02-05"
    assert ui_key("2024-03-02|eu") == '"2024-03-02|eu"'  # a multi-partition key: quoted
    assert ui_key('it\'s "q" \\ x') == '"it\'s \\"q\\" \\\\ x"'
