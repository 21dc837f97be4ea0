"""The shipped alert rules (deploy/prometheus/icelake-alerts.yml): valid for Prometheus, tested with
promtool's unit tests (alert_rules_test.yml: input series and the alerts they must fire), on metrics the
product writes, with annotations that name the table (or the sensor; the queue's alert is lake-wide)."""

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from icelake_assets.audit.metric_families import FAMILIES, LOOP_FAMILIES

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "deploy" / "prometheus" / "icelake-alerts.yml"
RULE_TESTS = Path(__file__).with_name("alert_rules_test.yml")


@pytest.fixture(scope="module")
def promtool() -> str:
    path = shutil.which("promtool")
    assert path, "promtool not found: scripts/bootstrap.sh installs it (Debian package prometheus)"
    return path


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, capture_output=True, text=True, timeout=120, cwd=RULE_TESTS.parent)


def _rules() -> list[dict]:
    return [r for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]]


def test_promtool_accepts_the_rules(promtool):
    done = _run(promtool, "check", "rules", str(RULES))
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"SUCCESS: {len(_rules())} rules found" in done.stdout


def test_promtool_unit_tests_of_the_rules_pass(promtool):
    done = _run(promtool, "test", "rules", RULE_TESTS.name)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_unit_tests_cover_every_alert():
    tested = set(re.findall(r"alertname: (\w+)", RULE_TESTS.read_text()))
    assert tested == {r["alert"] for r in _rules()}


def test_rules_use_only_metrics_the_product_writes():
    names = set(LOOP_FAMILIES)
    for fam in FAMILIES.values():
        names |= {fam.name} | (
            {f"{fam.name}_{s}" for s in ("bucket", "sum", "count")} if fam.buckets else set()
        )
    # In the expressions and in the annotations' queries and hints.
    used = {m for r in _rules() for m in re.findall(r"\bicelake_\w+", r["expr"] + str(r["annotations"]))}
    assert used and used <= names, used - names


def test_each_alert_names_its_table_or_sensor():
    lake_wide = {f.name for f in LOOP_FAMILIES.values() if not f.labels}
    for rule in _rules():
        notes = rule["annotations"]
        assert set(notes) >= {"summary", "description"}, rule["alert"]
        if set(re.findall(r"\bicelake_\w+", rule["expr"])) <= lake_wide:
            subject = "{{ $value | humanizeDuration }}"  # the queue: no table, its wait instead
        elif "sensor" in rule["expr"]:
            subject = "{{ $labels.sensor }}"
        else:
            subject = "{{ $labels.catalog }}.{{ $labels.namespace }}.{{ $labels.table }}"
        assert subject in notes["summary"] and subject in notes["description"], rule["alert"]
        assert rule["labels"]["severity"] in ("warning", "critical"), rule["alert"]
