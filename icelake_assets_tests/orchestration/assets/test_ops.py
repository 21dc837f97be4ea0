"""The op-failure path (orchestration/assets/ops.py): a work that raises leaves its cause in the run's
tags (``icelake/failure_cause``), the op's audit record (``reason``) and the Failure the run shows,
with the secrets a driver's error echoed redacted (issue 55)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from dagster import Failure

from icelake_assets.audit.writer import AuditWrite
from icelake_assets.catalog.connection import TableRef
from icelake_assets.orchestration.assets import audit_trail
from icelake_assets.orchestration.assets.ops import TableOpStep
from icelake_assets.orchestration.runs.run_tags import FAILURE_CAUSE_TAG, failure_of

REF = TableRef("lake", ("ns",), "t")
# A Spark error whose JVM trace names the catalog's JDBC URL and the store's keys.
TRACE = """An error occurred while calling o59.sql.
: org.apache.spark.SparkException: Job aborted due to stage failure
Caused by: java.sql.SQLException: jdbc:postgresql://icelake:s3cr3tPW@db/lake?password=s3cr3tPW refused \
(AWS key AKIAIOSFODNN7EXAMPLE, client_secret=cl1ent-S3cret)
"""
SECRETS = ("s3cr3tPW", "AKIAIOSFODNN7EXAMPLE", "cl1ent-S3cret")


class _Instance:
    def __init__(self) -> None:
        self.tags: dict[str, str] = {}

    def add_run_tags(self, run_id: str, tags: dict[str, str]) -> None:
        self.tags.update(tags)


def _failing_work(*_: Any, **__: Any) -> Any:
    raise RuntimeError(TRACE)


def test_a_failed_ops_run_tag_audit_reason_and_failure_hold_no_secret(monkeypatch):
    audited: list[Any] = []

    def write_audit(settings, records, **_: Any) -> AuditWrite:
        audited.extend(records)
        return AuditWrite(len(records), None, None)

    monkeypatch.setattr(audit_trail, "write_audit", write_audit)
    instance = _Instance()
    context = SimpleNamespace(
        instance=instance,
        run_id="r1",
        run=SimpleNamespace(tags={}),
        retry_number=0,
        has_partitions=False,
        partition_keys=[],
        log=SimpleNamespace(error=print, info=print, warning=print),
    )
    icelake = SimpleNamespace(settings=SimpleNamespace())
    table = SimpleNamespace(current_snapshot=lambda: None)
    step = TableOpStep(None, "rewrite_data_files", _failing_work)  # type: ignore[arg-type]
    with pytest.raises(Failure) as failed:
        step._work(context, icelake, None, REF, table, None, {})  # type: ignore[arg-type]
    kind, cause = failure_of(instance.tags, str(REF))
    [record] = audited
    said = {
        "tag": instance.tags[FAILURE_CAUSE_TAG],
        "tag of the table": cause,
        "audit reason": record.reason,
        "failure": failed.value.description,
    }
    assert {name: s for name, text in said.items() for s in SECRETS if s in (text or "")} == {}
    # Still the root cause, with what is not secret.
    assert "SQLException: jdbc:postgresql://icelake:***@db/lake" in instance.tags[FAILURE_CAUSE_TAG]
    assert record.decision == "failed" and kind == "error"
