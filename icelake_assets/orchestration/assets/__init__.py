"""The table assets and their maintenance runs: each table group's maintenance graph (graph.py) of
ops (ops.py) ending in validation (validation.py), the state passed between ops, what a run shows
and audits, lineage and the assets' descriptions."""
