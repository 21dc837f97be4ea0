"""The run model and crash recovery: one maintenance run per table (model.py) in its concurrency pool
(pools.py), the run workers' leases (leases.py), and recovery on every sensor tick (recovery.py:
stale runs failed, unrecorded commits reconciled into the audit)."""
