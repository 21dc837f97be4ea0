"""The chaos soak (issue 31): the whole stack as users deploy it (SeaweedFS, PostgreSQL, the daemon,
the resident Spark driver) under writers keeping ledgers and faults at random times from a seeded
plan, then the product alone; it fails on a lost or duplicated row, a missing file, an unaudited
commit, a run left in flight, a table not Healthy within 10 minutes of the last fault or a process
left behind (chaos_soak.py says what each module does).

    make soak MINUTES=3 [SEED=N] [STORAGE=sqlite]
    .venv/bin/python -m bench.soak.chaos_soak --minutes 3 --seed 42

Not part of ``make test`` nor ``make bench``; icelake_assets_tests/bench/soak/ tests its pure parts."""
