"""The real lake (issue 20): object storage and an Iceberg REST catalog, end to end, on SeaweedFS.

`weed mini` serves S3 and an Iceberg REST catalog; it runs open (anonymous S3, `auth: {type: noop}`)
and with credentials (OAuth2 client credentials for the catalog, keys for S3, or SigV4 for both).
pyiceberg writes small files; the product's settings, discovery, health statistics and orphan scan
read them; Spark (S3A, from `spark_config(settings)` alone) runs the four procedures in a process of
its own (s3_spark_job.py); DuckDB reads them over httpfs. Skips only when `weed` is not installed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pytest
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import IdentityTransform
from pyiceberg.types import LongType, NestedField, StringType

from icelake_assets.catalog.connection import CatalogUnavailableError, TableRef, load_table, open_catalog
from icelake_assets.catalog.discovery import discover_tables
from icelake_assets.demo.seaweedfs import S3Identity
from icelake_assets.health.orphans import scan_orphans
from icelake_assets.health.statistics import read_puffin_ndv, statistics_facts
from icelake_assets.health.stats import compute_table_stats
from icelake_assets.maintenance.verify.cross_engine import duckdb_read
from icelake_assets.settings import Policy, load_settings
from icelake_assets.settings.schema import INTERNAL_NAMESPACE
from icelake_assets.types import KnownTable
from icelake_assets_tests.servers import SeaweedFS, ServerUnavailable, seaweedfs_server

KEY, SECRET = "icelake-admin", "icelake-s3cr3t-9876"
SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=False),
    NestedField(2, "day", StringType(), required=False),
    NestedField(3, "note", StringType(), required=False),
)
BATCHES = 6
ROWS_PER_BATCH = 5


@pytest.fixture(scope="module", params=["open", "credentials"])
def weed(request):
    credentials = (KEY, SECRET) if request.param == "credentials" else None
    try:
        with seaweedfs_server(credentials) as server:
            yield server
    except ServerUnavailable as err:
        pytest.skip(str(err))


def settings_text(server: SeaweedFS, auth: str = "oauth2") -> str:
    """The settings a user writes for this lake: credentials only as ${VAR}."""
    lines = [
        "catalogs:",
        "  lake:",
        "    type: rest",
        f"    uri: {server.catalog_uri}",
        f"    warehouse: {server.warehouse}",
        f"    s3.endpoint: {server.s3_endpoint}",
        "    s3.region: us-east-1",
    ]
    if server.credentials is None:
        lines += ["    auth: {type: noop}", "    s3.anonymous: 'true'"]
    else:
        lines += [
            "    s3.access-key-id: ${LAKE_KEY}",
            "    s3.secret-access-key: ${LAKE_SECRET}",
        ]
        if auth == "oauth2":
            lines += [
                "    auth:",
                "      type: oauth2",
                "      oauth2:",
                "        client_id: ${LAKE_KEY}",
                "        client_secret: ${LAKE_SECRET}",
                f"        token_url: {server.token_url}",
            ]
        else:  # SigV4 signs the catalog's requests with the client.* keys (pyiceberg uses boto3)
            lines += [
                "    rest.sigv4-enabled: 'true'",
                "    rest.signing-name: s3tables",
                "    rest.signing-region: us-east-1",
                "    client.access-key-id: ${LAKE_KEY}",
                "    client.secret-access-key: ${LAKE_SECRET}",
            ]
    lines += ["spark:", "  master: local[1]"]
    return "\n".join(lines) + "\n"


def _environ(secret: str = SECRET) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    # pyarrow's AWS SDK would add a checksum header that unsigned (anonymous) uploads cannot carry.
    return {
        **env,
        "LAKE_KEY": KEY,
        "LAKE_SECRET": secret,
        "AWS_REQUEST_CHECKSUM_CALCULATION": "when_required",
    }


@pytest.fixture(scope="module")
def lake(weed, tmp_path_factory):
    """Two tables written by pyiceberg in small files: shop.orders (partitioned by day), shop.events."""
    folder = tmp_path_factory.mktemp("s3lake")
    path = folder / "icelake.yaml"
    path.write_text(settings_text(weed))
    with pytest.MonkeyPatch.context() as mp:
        for key, value in _environ().items():
            mp.setenv(key, value)
        for key in [
            k for k in os.environ if k.startswith("AWS_") and k != "AWS_REQUEST_CHECKSUM_CALCULATION"
        ]:
            mp.delenv(key)
        settings = load_settings(path)
        catalog = open_catalog(settings, "lake")
        catalog.create_namespace_if_not_exists("shop")
        spec = PartitionSpec(PartitionField(2, 1000, IdentityTransform(), "day"))
        tables = {
            "orders": catalog.create_table("shop.orders", SCHEMA, partition_spec=spec),
            "events": catalog.create_table("shop.events", SCHEMA),
        }
        for table in tables.values():
            for batch in range(BATCHES):
                ids = range(batch * ROWS_PER_BATCH, (batch + 1) * ROWS_PER_BATCH)
                table.append(
                    pa.table(
                        {
                            "id": pa.array(ids, pa.int64()),
                            "day": [f"2026-11-{1 + i % 2:02d}" for i in ids],
                            "note": [f"n{i}" for i in ids],
                        }
                    )
                )
        yield {"server": weed, "settings": settings, "path": path, "catalog": catalog, "tables": tables}


ROWS = BATCHES * ROWS_PER_BATCH


def test_settings_with_env_credentials_load_and_never_show_them(lake):
    settings = lake["settings"]
    shown = repr(settings) + repr(settings.redacted_catalog_properties("lake"))
    assert SECRET not in shown
    if lake["server"].credentials is not None:
        assert settings.catalog_properties("lake")["auth"]["oauth2"]["client_secret"] == SECRET
    else:
        assert settings.catalog_properties("lake")["auth"] == {"type": "noop"}


def test_discovery_and_health_stats_read_the_tables_on_s3(lake):
    found = {str(t.ref): t for t in discover_tables(lake["settings"])}
    assert {"lake.shop.orders", "lake.shop.events"} <= set(found)
    assert found["lake.shop.orders"].location.startswith("s3://warehouse/")
    assert found["lake.shop.orders"].partition_fields == ("day",)
    for short, files in (("orders", BATCHES * 2), ("events", BATCHES)):
        stats = compute_table_stats(lake["tables"][short], Policy())
        assert stats.data_files == files and stats.small_files == files
        assert stats.snapshots == BATCHES


def test_the_orphan_scan_lists_s3_finds_a_planted_orphan_and_skips_a_nested_table(lake):
    orders = lake["tables"]["orders"]
    location = orders.metadata.location.rstrip("/")
    orphan = f"{location}/data/day=2026-11-01/planted-orphan.parquet"
    # S3 table buckets admit writes under a table's data/ and metadata/ only: the nested table lives
    # inside the data folder (a table created at a path under another's, as users do by mistake).
    nested = f"{location}/data/archive-table"
    for path in (orphan, f"{nested}/data/00000-belongs-to-nested.parquet"):
        with orders.io.new_output(path).create(overwrite=True) as out:
            out.write(b"not referenced by orders")
    others = [KnownTable("lake.shop.archive", nested, {})]
    scan = scan_orphans(orders, "lake.shop.orders", 72, others=others, now=time.time() + 4 * 86400)
    found = [o.path for o in scan.orphans]
    assert found == [orphan]
    assert sum(scan.skipped.values()) == 1  # the nested table's file is that table's, not an orphan
    assert scan.listed_files > BATCHES * 2  # data, manifests, lists, metadata.json: all listed from S3


def test_duckdb_reads_the_same_rows_over_httpfs(lake):
    for table in lake["tables"].values():
        assert duckdb_read(table, "id", "sum").rows == ROWS


def test_wrong_credentials_name_the_catalog_and_the_cause(lake, tmp_path, monkeypatch):
    if lake["server"].credentials is None:
        pytest.skip("an open catalog has no credentials to get wrong")
    path = tmp_path / "icelake.yaml"
    path.write_text(settings_text(lake["server"]))
    monkeypatch.setenv("LAKE_KEY", KEY)
    monkeypatch.setenv("LAKE_SECRET", "not-the-secret")
    with pytest.raises(CatalogUnavailableError) as err:
        open_catalog(load_settings(path), "lake")
    message = str(err.value)
    assert "catalog 'lake'" in message and "401" in message and "Unauthorized" in message
    assert "not-the-secret" not in message


def test_wrong_storage_keys_name_each_table_and_the_cause_and_nothing_else_fails(lake, tmp_path):
    """The catalog answers (OAuth2 is right) but the S3 secret is wrong: `icelake health` still lists
    the tables, names each one it cannot read with the store's answer, never the secret, and exits 2."""
    if lake["server"].credentials is None:
        pytest.skip("an open store checks no keys")
    path = tmp_path / "icelake.yaml"
    text = settings_text(lake["server"]).replace(
        "s3.secret-access-key: ${LAKE_SECRET}", "s3.secret-access-key: ${BAD}"
    )
    path.write_text(text + "tables:\n  include: ['lake.shop.*']\n")
    env = {**_environ(), "BAD": "not-the-s3-secret", "ICELAKE_CONFIG": str(path)}
    done = subprocess.run(
        [sys.executable, "-m", "icelake_assets.cli", "health"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert done.returncode == 2, done.stdout + done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("icelake: error:")]
    for name in ("lake.shop.orders", "lake.shop.events"):
        [line] = [e for e in errors if name in e]
        assert (
            "403" in line
            or "Access Denied" in line
            or "ACCESS_DENIED" in line
            or "SignatureDoesNotMatch" in line
        ), line
    assert "not-the-s3-secret" not in done.stdout + done.stderr and SECRET not in done.stdout + done.stderr


def test_sigv4_signed_catalog_requests_work_with_boto3(lake, tmp_path, monkeypatch):
    if lake["server"].credentials is None:
        pytest.skip("an open catalog checks no signature")
    path = tmp_path / "icelake.yaml"
    path.write_text(settings_text(lake["server"], auth="sigv4"))
    for key, value in _environ().items():
        monkeypatch.setenv(key, value)
    catalog = open_catalog(load_settings(path), "lake")
    assert ("shop", "orders") in catalog.list_tables("shop")
    monkeypatch.setenv("LAKE_SECRET", "not-the-secret")
    wrong = open_catalog(load_settings(path), "lake")
    with pytest.raises(Exception, match="signature"):
        wrong.list_tables("shop")


def _spark_job(lake, table: str, jars_dir: Path | None = None) -> dict:
    env = _environ()
    if jars_dir is not None:
        env["ICELAKE_JARS_DIR"] = str(jars_dir)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "icelake_assets_tests.catalog.s3_spark_job",
            str(lake["path"]),
            "lake",
            "shop",
            table,
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=480,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert done.returncode == 0, done.stderr[-4000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    result["stderr"] = done.stderr
    return result


def test_spark_runs_the_four_procedures_over_s3a_from_the_settings_alone(lake):
    if lake["server"].credentials is None:
        pytest.skip("Spark runs once, with credentials (OAuth2 catalog, S3A keys)")
    result = _spark_job(lake, "orders")
    assert result["preflight"]["ok"], result["preflight"]["problems"]
    assert "s3://" in result["preflight"]["checked"]
    assert any(j.endswith("hadoop-aws-3.3.1.jar") for j in result["jars"])
    assert result["rows_before"] == result["rows_after"] == ROWS
    assert result["expire_snapshots"]["deleted_manifest_lists_count"] == BATCHES - 1
    assert result["rewrite_data_files"]["rewritten_data_files_count"] == BATCHES * 2
    assert result["files_before"] == BATCHES * 2 and result["files_after"] == 2  # one per day
    assert result["rewrite_manifests"]["added_manifests_count"] >= 1
    assert SECRET not in result["stderr"]
    # Directory markers kept (spark_storage.py): not one S3A bulk-delete warning (108 with markers deleted).
    assert "MultiObjectDeleteSupport" not in result["stderr"]
    table = load_table(lake["catalog"], TableRef("lake", ("shop",), "orders"))
    assert duckdb_read(table, "id", "sum").rows == ROWS  # what Spark wrote, read by another engine
    _statistics_registered_and_read_back(result["compute_statistics"], table)


def _statistics_registered_and_read_back(result: dict, table) -> None:
    """Issue 39: compute_statistics failed here with a 403. The Puffin file is registered for the
    current snapshot and pyiceberg reads its NDV blobs back over S3; SeaweedFS admits *.stats under
    metadata/ but not Iceberg's partition-stats-*.parquet, a refusal recorded beside them."""
    assert result["acted"], result["reason"]
    assert result.get("error") is None, result
    facts = statistics_facts(table)
    path = result["statistics_file"]
    assert path.startswith("s3://warehouse/shop/orders/metadata/") and path.endswith(".stats")
    assert facts.current and facts.path == path  # registered for the current snapshot
    assert result["registered"] and result["ndv_read_back"] == 3
    current = table.current_snapshot()
    assert current is not None and result["statistics_snapshot_id"] == current.snapshot_id
    ndv = read_puffin_ndv(table, path)  # from the Puffin file itself, over pyiceberg's S3 FileIO
    ids = {name: i for i, name in facts.columns}
    assert (ndv[ids["id"]], ndv[ids["day"]], ndv[ids["note"]]) == (ROWS, 2, ROWS)
    assert result["partition_statistics_error_kind"] == "access_denied", result
    assert "403" in result["partition_statistics_error"]


def test_the_preflight_refuses_before_any_commit_without_the_s3a_jars(lake, tmp_path):
    if lake["server"].credentials is None:
        pytest.skip("one refusal is enough; it runs with credentials")
    result = _spark_job(lake, "events", jars_dir=tmp_path / "no-jars")
    assert not any("hadoop-aws" in j for j in result["jars"])
    assert not result["preflight"]["ok"]
    problems = " ".join(result["preflight"]["problems"])
    assert "Spark has no usable FileSystem for s3://" in problems
    assert "S3AFileSystem" in problems and "scripts/bootstrap.sh" in problems
    assert result["snapshots"]["before"] == result["snapshots"]["after"] == BATCHES  # nothing committed


def _heal_lake(weed, folder: Path) -> Path:
    """Settings of an enforcing lake of two tables, one partitioned and one not, each in 8 small files,
    in a namespace of their own (the module's other tables are left out by `tables.include`)."""
    path = folder / "icelake.yaml"
    path.write_text(
        settings_text(weed)
        + "tables:\n  include: ['lake.heal.*']\n"
        + "thresholds:\n  mode: enforce\n  guards: {quiet_period_minutes: 0}\n"
        + "  small_files: {max_files_per_partition: 1}\n"
        + "  loop: {cross_engine_check: true}\n"
    )
    with pytest.MonkeyPatch.context() as mp:
        for key, value in _environ().items():
            mp.setenv(key, value)
        catalog = open_catalog(load_settings(path), "lake")
        catalog.create_namespace_if_not_exists("heal")
        spec = PartitionSpec(PartitionField(2, 1000, IdentityTransform(), "day"))
        for name, table_spec in (("daily", spec), ("flat", PartitionSpec())):
            table = catalog.create_table(f"heal.{name}", SCHEMA, partition_spec=table_spec)
            for batch in range(4):
                ids = range(batch * 10, (batch + 1) * 10)
                table.append(
                    pa.table(
                        {
                            "id": pa.array(ids, pa.int64()),
                            "day": [f"2026-11-{1 + i % 2:02d}" for i in ids],
                            "note": [f"n{i}" for i in ids],
                        }
                    )
                )
    return path


def _dagster_job(path: Path, home: Path, env: dict[str, str], *extra: str) -> tuple[dict, str]:
    done = subprocess.run(
        [sys.executable, "-m", "icelake_assets_tests.catalog.s3_dagster_job", str(path), str(home), *extra],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout.strip().splitlines()[-1]), done.stderr + done.stdout


def test_the_sensor_heals_a_lake_on_s3_through_dagster(weed, tmp_path):
    """The whole loop on S3 + REST, open and with credentials: discovery, a real sensor tick, the runs
    it launches (Spark over S3A, derived from the settings), validation with the cross-engine proof
    (DuckDB over httpfs), the audit table on the same lake, and a second tick with nothing to do."""
    path = _heal_lake(weed, tmp_path)
    result, output = _dagster_job(path, tmp_path / "home", _environ(), "lake.heal.daily")
    assert result["requested"] == ["lake.heal.daily", "lake.heal.flat"]
    for run in result["runs"]:
        assert run["success"], run["failures"]
        assert run["outcome"] == "effective" and str(run["validation"]).startswith(
            "rows match: 40 before, 40 after"
        ), run
        assert run["cross_engine"].count("40 rows") == 3, run["cross_engine"]  # spark, pyiceberg, duckdb
        assert all(run["checks"].values()), run["checks"]
    tables = result["tables"]
    assert tables["lake.heal.flat"]["files"] == 1  # daily is rolled back below, after its healing
    assert all(t["duckdb_rows"] == 40 for name, t in tables.items() if name.startswith("lake.heal."))
    assert result["requested_after"] == 0
    audit = result["audit"]
    assert {a["table"] for a in audit if a["decision"] == "launched"} == {"lake.heal.daily", "lake.heal.flat"}
    assert any(a["op"] == "rewrite_data_files" and a["decision"] == "acted" for a in audit)
    # The audit table lives on the same lake: an Iceberg table on S3 behind the REST catalog.
    assert any(
        name.startswith(f"lake.{INTERNAL_NAMESPACE}.") and t["location"].startswith("s3://")
        for name, t in tables.items()
    )
    assert SECRET not in output
    # Validation's rollback, committed through the REST catalog: back to where the run started, rows equal.
    assert result["rollback"] == {
        "rolled_back": True,
        "reason": result["rollback"]["reason"],
        "at_before": True,
        "rows_equal": True,
    }, result["rollback"]


def test_a_store_the_maintenance_identity_may_read_but_not_write_refuses_every_run_before_a_commit(
    tmp_path,
):
    """The catalog (OAuth2, admin) commits, but the S3 keys given to the product may only read: checks
    still read every table; each run is refused by the pre-flight, naming the table and the cause, and
    no table gains a snapshot (no expiry, no half-written rewrite)."""
    reader = S3Identity("maintenance", "maint-reader", "maint-r3ad-only-secret", ("Read", "List"))
    try:
        server_cm = seaweedfs_server((KEY, SECRET), identities=(reader,))
        server = server_cm.__enter__()
    except ServerUnavailable as err:
        pytest.skip(str(err))
    try:
        # The tables are written with the admin's keys (the writers' identity) ...
        path = _heal_lake(server, tmp_path)
        # ... and maintained with the reader's S3 keys; the catalog's OAuth2 client stays the admin.
        admin = settings_text(server)
        reader_text = admin.replace("s3.access-key-id: ${LAKE_KEY}", "s3.access-key-id: ${READER_KEY}")
        reader_text = reader_text.replace(
            "s3.secret-access-key: ${LAKE_SECRET}", "s3.secret-access-key: ${READER_SECRET}"
        )
        assert reader_text != admin and "client_id: ${LAKE_KEY}" in reader_text
        path.write_text(path.read_text().replace(admin, reader_text, 1))
        env = {**_environ(), "READER_KEY": reader.access_key, "READER_SECRET": reader.secret_key}
        result, output = _dagster_job(path, tmp_path / "home", env)
    finally:
        server_cm.__exit__(None, None, None)
    assert result["requested"] == ["lake.heal.daily", "lake.heal.flat"]  # metadata read: both degraded
    for run in result["runs"]:
        assert not run["success"]
        cause = " ".join(run["failures"])
        assert f"Failure: {run['table']}: pre-flight refused the run before any commit" in cause, cause
        assert "retry" not in cause and "partition" not in cause, cause  # a refusal, not a failed rewrite
        assert "403" in cause or "AccessDenied" in cause or "Access Denied" in cause, cause
    tables = result["tables"]
    assert tables["lake.heal.daily"]["snapshots"] == 4 and tables["lake.heal.flat"]["snapshots"] == 4
    assert tables["lake.heal.daily"]["files"] == 8 and tables["lake.heal.flat"]["files"] == 4
    assert reader.secret_key not in output and SECRET not in output


@pytest.mark.parametrize("library_retries", ["4", "0"])
def test_a_commit_conflict_answered_by_the_rest_server_is_retried(lake, monkeypatch, caplog, library_retries):
    """The audit table on S3 behind the REST catalog loses a real race (another writer commits between
    its file write and its commit): the REST server answers the stale commit with a conflict, which
    pyiceberg's retry (or, with it off, the audit log's own) handles as on a SQL catalog."""
    from icelake_assets.audit.records import AuditRecord
    from icelake_assets.audit.store import AuditLog

    caplog.set_level("WARNING", logger="pyiceberg")
    settings = lake["settings"].model_copy(
        update={
            "audit": lake["settings"].audit.model_copy(update={"table": f"icelake.race_{library_retries}"})
        }
    )
    log = AuditLog.from_settings(settings)
    log.append(AuditRecord("lake.shop.orders", "decision", "deferred", "sensor", reason="first"))
    with log.table().transaction() as tx:
        tx.set_properties({"commit.retry.num-retries": library_retries})
    log._table = None
    other = AuditLog.from_settings(settings)
    write, raced = AuditLog._write_files, []

    def write_then_lose_race(self, table, arrow):
        files = write(self, table, arrow)
        if self is log and not raced:
            raced.append(True)
            other.append(AuditRecord("lake.shop.orders", "decision", "launched", "sensor", reason="winner"))
        return files

    monkeypatch.setattr(AuditLog, "_write_files", write_then_lose_race)
    assert log.append(AuditRecord("lake.shop.orders", "decision", "held", "sensor", reason="loser")) == 1
    assert sorted(r.reason for r in log.records()) == ["first", "loser", "winner"]
    snaps = log.table().metadata.snapshots
    assert len(snaps) == 3 and snaps[2].parent_snapshot_id == snaps[1].snapshot_id
    pyiceberg_retried = any("retrying (1/" in r.getMessage() for r in caplog.records)
    assert pyiceberg_retried == (library_retries != "0")
