"""The run tags naming the tables a maintenance run carries, and why one of them failed in it.

A run of one table names it in ``icelake/table``; a run of several small tables (planning/packing.py)
names them all in ``icelake/tables`` (a JSON list, best-ranked first) and carries no
``icelake/table``. A table that failed in a run is named with its cause under the run-wide keys
(a run of one table) and under keys of its own (``icelake/failure.<digest>``), so a run of several
tables tells each one's cause apart."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence

from icelake_assets.planning.relaunch import table_tag_key

# The table a run maintains, on every run the product launches (sensor, schedule, approval); the
# only way to tell the table of a maintenance *job* run (asset_keys.defined_by_project: no asset).
TABLE_TAG = "icelake/table"
TABLES_TAG = "icelake/tables"  # a run of several tables: every one of them (a JSON list)
TABLE_COUNT_TAG = "icelake/table_count"
# Run tags of a table that failed in a run: its name, the kind of cause (icelake_assets.causes) and
# the cause itself, cut to fit a tag.
FAILURE_TABLE_TAG = "icelake/failure_table"
FAILURE_KIND_TAG = "icelake/failure_kind"
FAILURE_CAUSE_TAG = "icelake/failure_cause"
_FAILURE_OF = "icelake/failure"
FAILURE_CAUSE_MAX = 1000


def named_tables(tags: Mapping[str, str]) -> tuple[str, ...] | None:
    """The tables a run's tags name (None: they name none)."""
    if TABLE_TAG in tags:
        return (tags[TABLE_TAG],)
    if tags.get(TABLES_TAG):
        return tuple(json.loads(tags[TABLES_TAG]))
    return None


def shared_run_tags(tables: Sequence[str]) -> dict[str, str]:
    """The tags of a run of several tables (JSON: a table's name may hold any character)."""
    return {TABLES_TAG: json.dumps(list(tables), ensure_ascii=False), TABLE_COUNT_TAG: str(len(tables))}


def failure_tags(table: str, kind: str, cause: str) -> dict[str, str]:
    """The run tags naming a table that failed in the run and why (read back by :func:`failure_of`)."""
    return {
        FAILURE_TABLE_TAG: table,
        FAILURE_KIND_TAG: kind,
        FAILURE_CAUSE_TAG: cause[:FAILURE_CAUSE_MAX],
        table_tag_key(_FAILURE_OF, table): json.dumps({"kind": kind, "cause": cause[:FAILURE_CAUSE_MAX]}),
    }


def tables_failure_tags(tables: Iterable[str], kind: str, cause: str) -> dict[str, str]:
    """The same cause for every table of a run (its worker was lost: each table's run was
    interrupted); the run-wide keys only for a run of one table."""
    names = list(tables)
    if len(names) == 1:
        return failure_tags(names[0], kind, cause)
    payload = json.dumps({"kind": kind, "cause": cause[:FAILURE_CAUSE_MAX]})
    return {table_tag_key(_FAILURE_OF, t): payload for t in names}


def failure_of(tags: Mapping[str, str], table: str) -> tuple[str | None, str | None]:
    """The kind and cause a run's tags record of ``table``'s failure ((None, None): none)."""
    raw = tags.get(table_tag_key(_FAILURE_OF, table))
    if raw is not None:
        data = json.loads(raw)
        return data.get("kind"), data.get("cause")
    if tags.get(FAILURE_TABLE_TAG) == table:
        return tags.get(FAILURE_KIND_TAG), tags.get(FAILURE_CAUSE_TAG)
    return None, None
