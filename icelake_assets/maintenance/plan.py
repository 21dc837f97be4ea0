"""Which maintenance ops act, and why: the decision core's (icelake_assets/planning/, one module per
concern, each deciding from the numbers its health finding grades). Re-exported here for the runner,
which decides again on the table as it is when each op starts."""

from icelake_assets.planning.decision import Decision
from icelake_assets.planning.deletes import deletes_crossed
from icelake_assets.planning.manifests import decide_manifests
from icelake_assets.planning.orphans import decide_orphans
from icelake_assets.planning.rewrite import (
    MAX_FILE_GROUP_BYTES,
    RewritePlan,
    decide_rewrite,
    plan_rewrite,
    rewritable,
    rewrite_candidates,
    rewrite_options,
    small_file_limit,
)
from icelake_assets.planning.snapshots import decide_expire, expire_cutoff
from icelake_assets.planning.statistics import decide_statistics, plan_statistics

__all__ = [
    "MAX_FILE_GROUP_BYTES",
    "Decision",
    "RewritePlan",
    "decide_expire",
    "decide_manifests",
    "decide_orphans",
    "decide_rewrite",
    "decide_statistics",
    "deletes_crossed",
    "expire_cutoff",
    "plan_rewrite",
    "plan_statistics",
    "rewritable",
    "rewrite_candidates",
    "rewrite_options",
    "small_file_limit",
]
