"""How an operator approves a held or proposed table's maintenance, spelled out for the UI and the
command line: the exact ``icelake approve`` command, and a link to the Dagster launchpad of the
table's maintenance job with the table selected and the approval tag filled in (no tag to type).

The link goes through Dagster's ``/guess/<job>/...`` route (it finds the job's code location and keeps
the query) to ``.../jobs/<job>/playground/setup``, whose query Dagster's UI turns into a launchpad
session: ``tags[i][key]`` / ``tags[i][value]`` and ``assetSelection[i][assetKey][path][j]``
(``LaunchpadSetupRoot.tsx``, parsed with ``qs``). Plain strings: no Dagster import.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from urllib.parse import quote, urlencode

from icelake_assets.planning.guards import APPROVAL_TAG
from icelake_assets.settings.asset_keys import asset_key_path
from icelake_assets.types import TableRef

APPROVED_BY_TAG = "icelake/approved_by"
PLAN_DIGEST_TAG = "icelake/plan_digest"


def approve_command(ref: TableRef) -> str:
    """The command that approves the table's maintenance (the UI's asset key form of its name)."""
    return "icelake approve " + "/".join(ref.asset_key_path)


def launchpad_path(job: str, asset_path: Sequence[str], tags: Mapping[str, str] | None = None) -> str:
    """A root-relative link to the launchpad of ``job`` with ``asset_path`` selected and ``tags``
    (default: the approval tag) filled in."""
    tags = {APPROVAL_TAG: "true"} if tags is None else dict(tags)
    query: list[tuple[str, str]] = []
    for i, (key, value) in enumerate(tags.items()):
        query += [(f"tags[{i}][key]", key), (f"tags[{i}][value]", value)]
    query += [(f"assetSelection[0][assetKey][path][{j}]", part) for j, part in enumerate(asset_path)]
    return f"/guess/{quote(job, safe='')}/playground/setup?{urlencode(query)}"


def approval_markdown(ref: TableRef, job: str | None, base_url: str = "") -> str:
    """Markdown telling how to approve: the command, and the launchpad link when the job is known."""
    text = f"Approve from a shell: `{approve_command(ref)}`"
    if job:
        link = base_url.rstrip("/") + launchpad_path(job, asset_key_path(ref))
        text += (
            f", or in the UI: [open the launchpad of {job} with {APPROVAL_TAG}=true filled in]({link})"
            " and click *Launch Run*"
        )
    return text


def _cell(text: str, limit: int = 160) -> str:
    text = " ".join(str(text).split()).replace("|", "\\|")
    return text if len(text) <= limit else text[: limit - 1] + "…"


def waiting_markdown(rows: Sequence[tuple[TableRef, str, str, int, str | None]]) -> str:
    """The tables that wait (held, proposed, deferred) as a Markdown table: ``rows`` of (table, outcome,
    the guard's or mode's reason, estimated rewrite bytes, the table's maintenance job)."""
    lines = [
        "| table | waits | why | rewrite estimate | how to go ahead |",
        "|---|---|---|---|---|",
    ]
    for ref, outcome, reason, estimate, job in rows:
        if outcome in ("held", "proposed"):
            how = f"`{approve_command(ref)}`"
            if job:
                how += f" or [launchpad, approval filled in]({launchpad_path(job, asset_key_path(ref))})"
        else:
            how = "nothing: the sensor retries when the writers are quiet"
        lines.append(f"| {_cell(str(ref))} | {outcome} | {_cell(reason)} | {estimate:,} bytes | {how} |")
    return "\n".join(lines)
