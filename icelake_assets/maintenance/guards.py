"""The guards are the decision core's (planning/guards.py); re-exported for the runner."""

from icelake_assets.planning.guards import APPROVAL_TAG, Verdict, estimated_rewrite_bytes, evaluate_guards

__all__ = ["APPROVAL_TAG", "Verdict", "estimated_rewrite_bytes", "evaluate_guards"]
