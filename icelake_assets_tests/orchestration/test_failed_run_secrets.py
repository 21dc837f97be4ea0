"""Secrets never leak from a run that fails (issue 55, item 1): secrets planted as the product takes them
(``${VAR}`` in the settings: a catalog password in a URI, an S3 secret key, an OAuth2 client secret, an
agent's token) end up in the messages of the errors a maintenance run fails with, a chained cause
included; a real Dagster run (its own instance folder) fails, and none of them, plain, URL-encoded or
base64, is in the run's event log (every record serialized) or tags, the instance's files (compute
logs, storage), the audit table or the product's log lines.

Three ways to fail, each before Spark starts: an op's work raising a Spark-shaped error from an OS error
(ops.py ``_work``), a catalog that fails to load the table with the driver's error under the product's
redacted one (``load_table_of_run``), an error no code of ours catches (the table's stats). Then how an
op hands any error to Dagster (ops._errors_told_redacted, commit_gate.stop_if_fenced): from a redacted
stand-in (causes.RedactedCause) with no chain, retried under a retry policy as an uncaught error was."""

from __future__ import annotations

import base64
import traceback
import uuid
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from urllib.parse import quote, quote_plus

import pyarrow as pa
import pytest
import yaml
from dagster import (
    DagsterEventType,
    DagsterInstance,
    DagsterInvariantViolationError,
    Failure,
    RetryPolicy,
    RetryRequested,
    job,
    op,
)
from dagster._serdes import serialize_value
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField

from icelake_assets.audit.store import AuditLog
from icelake_assets.catalog.connection import TableRef, open_catalog
from icelake_assets.causes import RedactedCause
from icelake_assets.cli import main
from icelake_assets.maintenance.ops import chain
from icelake_assets.maintenance.spark import fencing
from icelake_assets.orchestration.assets.commit_gate import stop_if_fenced
from icelake_assets.orchestration.assets.ops import _errors_told_redacted
from icelake_assets.orchestration.project import MAINTENANCE_JOB, build_definitions
from icelake_assets.orchestration.resources import IcelakeResource
from icelake_assets.settings import Settings, load_settings
from icelake_assets_tests.conftest import TEST_THRESHOLDS

SCHEMA = Schema(NestedField(1, "id", LongType()))
# The first op of the chain: nothing before it starts Spark.
FIRST_OP = chain.MAINTENANCE_OPS[0].name


def _planted() -> dict[str, str]:
    """One secret per kind the product accepts (environment variable → value); some carry characters
    that URL-encoding changes, as real ones do."""
    tag = uuid.uuid4().hex[:12]
    return {
        "LEAK_DB_PASSWORD": f"dbPW{tag}x",
        "LEAK_S3_SECRET_KEY": f"wJalr/{tag}+K7MDENG/bPxRfiCY{tag[:4]}",
        "LEAK_OAUTH_CREDENTIAL": f"icelake-client:cs3cr3t{tag}~!",
        "LEAK_AGENT_TOKEN": f"agentTOKEN{tag}{tag}",
    }


def _secret_parts(secrets: dict[str, str]) -> dict[str, str]:
    """What must never show: each value, and the client secret alone (an OAuth error echoes it)."""
    client_secret = secrets["LEAK_OAUTH_CREDENTIAL"].partition(":")[2]
    return {**secrets, "LEAK_OAUTH_CLIENT_SECRET": client_secret}


def _forms(value: str) -> dict[str, str]:
    """A secret as text may carry it: plain, URL-encoded, base64 (unpadded: a prefix of the padded)."""
    return {
        "plain": value,
        "url-encoded": quote(value, safe=""),
        "form-encoded": quote_plus(value),
        "base64": base64.b64encode(value.encode()).decode().rstrip("="),
    }


def _lake(folder: Path) -> tuple[Settings, TableRef]:
    name = f"fail{uuid.uuid4().hex[:8]}"
    (folder / "lake" / "warehouse").mkdir(parents=True)
    data = {
        "catalogs": {
            name: {
                "type": "sql",
                "uri": "sqlite:///lake/catalog.db?password=${LEAK_DB_PASSWORD}",
                "warehouse": "lake/warehouse",
                "s3.secret-access-key": "${LEAK_S3_SECRET_KEY}",
                "credential": "${LEAK_OAUTH_CREDENTIAL}",
            }
        },
        "thresholds": {**TEST_THRESHOLDS, "mode": "enforce", "guards": {"quiet_period_minutes": 0}},
        "spark": {"config": {"spark.hadoop.fs.s3a.secret.key": "${LEAK_S3_SECRET_KEY}"}},
        "agents": {"ops-bot": {"token": "${LEAK_AGENT_TOKEN}"}},
    }
    path = folder / "icelake.yaml"
    path.write_text(yaml.safe_dump(data))
    settings = load_settings(path)
    ref = TableRef(name, ("ns",), "t")
    catalog = open_catalog(settings, name, create=True)
    catalog.create_namespace("ns")
    catalog.create_table(ref.identifier, SCHEMA).append(pa.table({"id": pa.array([1, 2], pa.int64())}))
    return settings, ref


def _spark_error(s: dict[str, str]) -> Exception:
    """A Spark (Java) error naming the JDBC URL with its password, raised from an OS error that names
    the S3A key, echoes an OAuth request and an agent's bearer token."""
    client_id, _, client_secret = s["LEAK_OAUTH_CREDENTIAL"].partition(":")
    basic = base64.b64encode(s["LEAK_OAUTH_CREDENTIAL"].encode()).decode()
    try:
        raise OSError(
            f"fs.s3a.secret.key={s['LEAK_S3_SECRET_KEY']} refused; OAuth response to "
            f"grant_type=client_credentials&client_id={client_id}&client_secret={quote(client_secret)} "
            f"(Authorization: Basic {basic}); agent {s['LEAK_AGENT_TOKEN']}"
        )
    except OSError as err:
        try:
            raise RuntimeError(
                "An error occurred while calling o59.sql.\n"
                ": org.apache.spark.SparkException: Job aborted due to stage failure\n"
                f"Caused by: java.sql.SQLException: jdbc:postgresql://icelake:{s['LEAK_DB_PASSWORD']}@db/lake "
                f"refused (secret {quote_plus(s['LEAK_S3_SECRET_KEY'])})"
            ) from err
        except RuntimeError as outer:
            return outer


def _fail_in_work(monkeypatch: pytest.MonkeyPatch, s: dict[str, str]) -> None:
    def work(*_: Any, **__: Any) -> Any:
        raise _spark_error(s)

    # The op's work, as its descriptor holds it when the definitions build.
    ops = tuple(replace(o, work=work) if o.name == FIRST_OP else o for o in chain.MAINTENANCE_OPS)
    monkeypatch.setattr(chain, "MAINTENANCE_OPS", ops)


def _fail_loading(monkeypatch: pytest.MonkeyPatch, s: dict[str, str]) -> None:
    """The catalog's driver fails with the endpoint it tried (the product's own error is redacted, the
    driver's under it is not)."""
    real = SqlCatalog.load_table

    def load_table(self: SqlCatalog, identifier: Any) -> Any:
        if tuple(identifier) != ("ns", "t"):  # the audit table
            return real(self, identifier)
        raise ConnectionRefusedError(
            f"could not connect to postgresql://icelake:{s['LEAK_DB_PASSWORD']}@db:5432/lake "
            f"(token {s['LEAK_AGENT_TOKEN']})"
        ) from _spark_error(s)

    monkeypatch.setattr(SqlCatalog, "load_table", load_table)


def _fail_uncaught(monkeypatch: pytest.MonkeyPatch, s: dict[str, str]) -> None:
    """An error where no code of ours catches one: reading the table's stats before its first op."""

    def stats(self: IcelakeResource, table: Any, policy: Any = None) -> Any:
        raise ValueError(f"manifest list s3://b/m.avro?X-Amz-Credential={s['LEAK_S3_SECRET_KEY']}") from (
            _spark_error(s)
        )

    monkeypatch.setattr(IcelakeResource, "stats", stats)


# How each run fails, whether it is set up before the definitions build (the work is bound then; the
# others fail at run time, after discovery read the table), and the class the run's error still names.
FAILURES: dict[str, tuple[Callable[[pytest.MonkeyPatch, dict[str, str]], None], bool, str]] = {
    "work": (_fail_in_work, True, "SQLException"),
    "load": (_fail_loading, False, "ConnectionRefusedError"),
    "uncaught": (_fail_uncaught, False, "ValueError"),
}


def _files_text(folder: Path) -> str:
    return "\n".join(p.read_bytes().decode("utf-8", "replace") for p in folder.rglob("*") if p.is_file())


@pytest.mark.parametrize("failure", list(FAILURES))
def test_a_failed_runs_sinks_hold_no_planted_secret(failure, tmp_path, monkeypatch, capfd, caplog):
    caplog.set_level("DEBUG")
    secrets = _planted()
    for var, value in secrets.items():
        monkeypatch.setenv(var, value)
    settings, ref = _lake(tmp_path / "lake_home")
    fail, before_build, named = FAILURES[failure]
    if before_build:
        fail(monkeypatch, secrets)
    job = build_definitions(settings).resolve_job_def(MAINTENANCE_JOB)
    if not before_build:
        fail(monkeypatch, secrets)
    home = tmp_path / "dagster_home"
    home.mkdir()
    with DagsterInstance.local_temp(str(home)) as instance:
        result = job.execute_in_process(instance=instance, raise_on_error=False)
        assert not result.success
        [failed] = [e for e in result.all_events if e.event_type == DagsterEventType.STEP_FAILURE]
        assert failed.step_key is not None and failed.step_key.endswith(FIRST_OP)
        run = instance.get_run_by_id(result.run_id)
        assert run is not None
        events = [serialize_value(e) for e in instance.all_logs(result.run_id)]
        compute_logs = Path(instance.compute_log_manager._base_dir)  # type: ignore[attr-defined]
    audit = AuditLog.from_settings(settings)
    audit_table = audit.table(create=False)
    audit_rows = [] if audit_table is None else audit_table.scan().to_arrow().to_pylist()
    out, err = capfd.readouterr()
    # What an operator reads after the failure: the commands' JSON (the audit of the failed op, the health).
    for command in (["audit", str(ref), "--json"], ["health", str(ref), "--json"]):
        main(["--config", str(settings.source), *command])
    commands_out, commands_err = capfd.readouterr()
    sinks = {
        "event log": "\n".join(events),
        "run tags": serialize_value(run.tags),
        "run record": serialize_value(run),
        "compute logs": _files_text(compute_logs),
        "instance files": _files_text(home),
        "audit table": repr(audit_rows),
        "log lines": out + err + caplog.text,
        "icelake --json": commands_out + commands_err,
        # The metrics textfile and the audit table's files live beside the settings file.
        "lake folder": _files_text(tmp_path / "lake_home"),
    }
    hits: dict[str, set[str]] = {}
    for sink, text in sinks.items():
        for var, value in _secret_parts(secrets).items():
            for form, encoded in _forms(value).items():
                if encoded in text:
                    hits.setdefault(sink, set()).add(f"{var} ({form})")
    assert hits == {}, f"planted secrets found: {hits}"

    # Not vacuous: the run's failure and its compute logs were recorded; its error still names the
    # original class, with the secrets masked; the op's failure is audited.
    assert sinks["compute logs"], "the run's compute logs were captured"
    assert commands_out.count(str(ref)) >= 2, "both commands answered about the table"
    error = serialize_value(failed.step_failure_data.error if failed.step_failure_data else None)
    assert "***" in error and named in error
    if failure == "work":
        assert [r.decision for r in audit.records(table=str(ref)) if r.kind == "op"] == ["failed"]


# What an op raises, as TableOpStep.run hands it to Dagster (ops._errors_told_redacted).
SECRET = "s3cr3tPW-0123456789"


def _chained() -> Exception:
    try:
        raise OSError(f"jdbc:postgresql://icelake:{SECRET}@db/lake refused")
    except OSError as err:
        try:
            raise ValueError(f"client_secret={SECRET}") from err
        except ValueError as outer:
            return outer


def _raised_through_op(error: BaseException) -> BaseException:
    with pytest.raises(BaseException) as raised:
        with _errors_told_redacted():
            raise error
    return raised.value


def _chain_text(err: BaseException) -> str:
    """Everything Dagster records of an exception's chain (SerializableErrorInfo follows it)."""
    return "".join(traceback.TracebackException.from_exception(err).format())


def test_an_uncaught_error_becomes_a_redacted_failure_retried_as_before():
    failure = _raised_through_op(_chained())
    assert isinstance(failure, Failure) and failure.allow_retries  # Dagster retried it under a policy
    cause = failure.__cause__
    assert isinstance(cause, RedactedCause) and cause.__cause__ is None and cause.__context__ is None
    assert failure.__suppress_context__
    assert str(cause).startswith("ValueError: client_secret=***") and "(caused by OSError" in str(cause)
    assert SECRET not in _chain_text(failure) and SECRET not in (failure.description or "")
    # Dagster's own errors were never retried: still not.
    dagster_error = _raised_through_op(DagsterInvariantViolationError(f"bad {SECRET}"))
    assert isinstance(dagster_error, Failure) and not dagster_error.allow_retries


def test_a_failure_goes_on_from_a_redacted_cause_and_control_flow_passes_unchanged():
    try:
        raise Failure(description="told", allow_retries=False) from _chained()
    except Failure as err:
        failure = err
    assert _raised_through_op(failure) is failure and not failure.allow_retries
    assert isinstance(failure.__cause__, RedactedCause) and SECRET not in _chain_text(failure)
    retry = RetryRequested(max_retries=1)
    assert _raised_through_op(retry) is retry
    interrupt = KeyboardInterrupt()
    assert _raised_through_op(interrupt) is interrupt


def test_a_fenced_stop_chains_no_raw_error(monkeypatch):
    monkeypatch.setattr(fencing, "fenced", lambda: "the lease expired")
    context = SimpleNamespace(log=SimpleNamespace(warning=lambda *_: None))
    with pytest.raises(Failure) as stopped:
        stop_if_fenced(context, _chained())  # type: ignore[arg-type]
    assert isinstance(stopped.value.__cause__, RedactedCause) and SECRET not in _chain_text(stopped.value)


def test_dagster_still_retries_an_op_whose_uncaught_error_is_redacted(tmp_path):
    attempts: list[int] = []

    @op(retry_policy=RetryPolicy(max_retries=1))
    def flaky(context) -> None:
        attempts.append(context.retry_number)
        with _errors_told_redacted():
            if context.retry_number == 0:
                raise _chained()

    @job
    def once_flaky() -> None:
        flaky()

    with DagsterInstance.local_temp(str(tmp_path)) as instance:
        result = once_flaky.execute_in_process(instance=instance)
        events = "".join(serialize_value(e) for e in instance.all_logs(result.run_id))
    assert result.success and attempts == [0, 1]
    assert "STEP_UP_FOR_RETRY" in events and "client_secret=***" in events and SECRET not in events
