"""The relaunch hold: a plan whose last run was ineffective is not launched again on the same table
state and policy before its backoff. Read from the run tags the maintenance run records
(maintenance/results/effect.py writes them, the sensor reads the latest run's back)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping

from icelake_assets.settings import Policy

# Run tags carrying the outcome (read back by the sensor, see relaunch_hold).
OUTCOME_TAG = "icelake/outcome"
OUTCOME_SNAPSHOT_TAG = "icelake/outcome_snapshot"
POLICY_HASH_TAG = "icelake/policy_hash"
OUTCOME_TABLE_TAG = "icelake/outcome_table"  # the table, on every run that recorded an outcome
# A run of several tables (planning/packing.py) records each table's outcome under keys of its own:
# ``icelake/outcome_table.<digest>`` names the table (the sensor's filter), ``icelake/outcome.<digest>``
# holds the tags above as JSON. Runs of one table carry both forms.


def table_tag_key(prefix: str, table: str) -> str:
    """A run tag key of ``prefix`` for one table of the run: Dagster's tag keys allow 63 characters of
    ``[A-Za-z0-9_.-]`` after one ``prefix/``, so the table is named by a digest of its name."""
    return f"{prefix}.{hashlib.sha256(table.encode()).hexdigest()[:16]}"


def table_outcome_tags(table: str, tags: Mapping[str, str], shared: bool = False) -> dict[str, str]:
    """``tags`` (the outcome of ``table``) under the table's own keys and, in a run of this table
    alone (not ``shared``), under the run-wide keys too (the UI's run list shows them)."""
    run_wide = {} if shared else {**tags, OUTCOME_TABLE_TAG: table}
    return {
        **run_wide,
        table_tag_key(OUTCOME_TABLE_TAG, table): table,
        table_tag_key(OUTCOME_TAG, table): json.dumps(dict(tags), sort_keys=True, separators=(",", ":")),
    }


def outcome_filter(table: str) -> dict[str, str]:
    """The run tags that find the runs which recorded ``table``'s outcome (RunsFilter's tags)."""
    return {table_tag_key(OUTCOME_TABLE_TAG, table): table}


def outcome_of(run_tags: Mapping[str, str], table: str) -> dict[str, str]:
    """``table``'s outcome tags in a run's tags, in the run-wide form (what relaunch_hold reads)."""
    raw = run_tags.get(table_tag_key(OUTCOME_TAG, table))
    if raw is None:
        return dict(run_tags) if run_tags.get(OUTCOME_TABLE_TAG) == table else {}
    return {**json.loads(raw), OUTCOME_TABLE_TAG: table}


def policy_hash(policy: Policy) -> str:
    """A short fingerprint of the effective policy: a new one lets the sensor try again."""
    text = json.dumps(policy.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def relaunch_hold(
    last: Mapping[str, str] | None, current_snapshot_id: int | None, policy: Policy, age_hours: float | None
) -> str | None:
    """Why the sensor must not launch again, or None.

    ``last``: the run tags of the table's latest maintenance run that recorded an outcome;
    ``age_hours``: how long ago it ended. A plan that was ineffective is not relaunched while the
    table is where that run left it (no commit since), the policy is the same, and the backoff
    (``loop.relaunch_backoff_hours``) has not passed: it would do the same nothing again."""
    if not last or last.get(OUTCOME_TAG) != "ineffective":
        return None
    if last.get(OUTCOME_SNAPSHOT_TAG) != str(current_snapshot_id):
        return None  # something committed since: a new state deserves a new plan
    if last.get(POLICY_HASH_TAG) != policy_hash(policy):
        return None  # the operator changed the policy: try it
    backoff = policy.loop.relaunch_backoff_hours
    if age_hours is None or age_hours >= backoff:
        return None
    return (
        f"the last maintenance run left its findings failing (ineffective) and neither the table nor its "
        f"policy changed since; next attempt after the {backoff:g} h backoff "
        f"({backoff - age_hours:.1f} h left) or on a policy change"
    )
