# The two commands of the README: `make run` (demo lake + Dagster) and `make test`.
SHELL := /bin/bash
PY := .venv/bin/python
# LAKE=s3: the demo lake on SeaweedFS (S3 + an Iceberg REST catalog) with its own Dagster instance.
LAKE ?= local
ifeq ($(LAKE),s3)
export DAGSTER_HOME := $(CURDIR)/.lake-s3/dagster_home
else
export DAGSTER_HOME := $(CURDIR)/.dagster_home
endif
HOST ?= 127.0.0.1
PORT ?= 3000
SCALE ?= demo

.PHONY: bootstrap run test unit demo demo-lake health bench validate clean cycles snapshots lock soak

bootstrap:
	@scripts/bootstrap.sh

$(DAGSTER_HOME)/dagster.yaml: dagster.yaml
	@mkdir -p $(DAGSTER_HOME) && cp dagster.yaml $@

demo-lake: bootstrap
	$(PY) -m icelake_assets.cli demo-lake --scale $(SCALE)

# Builds the demo lake if it is not there, then starts the Dagster webserver and daemon. Through
# scripts/run_dagster.py: Ctrl-C or SIGTERM stops every process dagster dev started (runs in flight too).
# LAKE=s3 starts SeaweedFS first and builds the demo lake there (icelake_assets/demo/s3_lake.py).
run: bootstrap $(DAGSTER_HOME)/dagster.yaml
ifeq ($(LAKE),s3)
	$(PY) -m icelake_assets.demo.s3_lake --scale $(SCALE) -- -h $(HOST) -p $(PORT) -w workspace.yaml
else
	@[ -f .lake/catalog.db ] || $(PY) -m icelake_assets.cli demo-lake --scale $(SCALE)
	$(PY) scripts/run_dagster.py -- -h $(HOST) -p $(PORT) -w workspace.yaml
endif

# Lint and format (ruff), types (mypy), import layers (lint-imports), then the tests. TEST_WORKERS=2 runs
# them on pytest-xdist workers (a module per worker at a time; conftest.py groups the timing-sensitive
# ones); 0 (the default until a full run on two workers is measured on a quiet machine): one process.
TEST_WORKERS ?= 0
test: bootstrap
	.venv/bin/ruff check icelake_assets icelake_assets_tests bench
	.venv/bin/ruff format --check icelake_assets icelake_assets_tests bench
	.venv/bin/mypy
	.venv/bin/lint-imports
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadgroup

# The unit tests alone (seconds; no Spark, server or Dagster instance): `make test` runs them too.
unit: bootstrap
	$(PY) -m pytest -q -m "not integration" -n $(TEST_WORKERS) --dist loadgroup

# Headless: rebuilds the degraded demo lake, checks, maintains through Dagster, prints before/after.
demo: bootstrap $(DAGSTER_HOME)/dagster.yaml
	$(PY) -m icelake_assets.cli demo --scale $(SCALE)

health: bootstrap
	$(PY) -m icelake_assets.cli health --orphans

validate: bootstrap
	.venv/bin/dagster definitions validate -w workspace.yaml

bench: bootstrap
	$(PY) -m bench

# Chaos soak (issue 31; not part of `make test`): SeaweedFS, the daemon, writers with ledgers and faults
# at random times for MINUTES (default 30), then the product alone; fails on a lost or duplicated row,
# a missing file, an unaudited commit, a run left in flight, a table not Healthy within 10 minutes of
# the last fault or a process left behind. `make soak MINUTES=3` is the short variant; SEED replays.
# The instance on PostgreSQL (killed and restarted among the faults), partition backfills on the
# multiprocess executor and runs terminated through the API (issue 38); STORAGE=sqlite for SQLite.
# Issue 50: Terminates inside partial-progress rewrites (no commit 2 s after, no retry), run workers
# paused past their lease (no commit after the self-fence), a retention table whose writer writes
# far-future and Long.MAX values (nothing lost outside what the policy expires).
MINUTES ?= 30
soak: bootstrap
	$(PY) -m bench.soak.chaos_soak --minutes $(MINUTES) $(if $(SEED),--seed $(SEED)) $(if $(STORAGE),--storage $(STORAGE))

clean:
	rm -rf .lake .dagster_home .lake-s3

# No import cycle in the package (grimp).
cycles: bootstrap
	$(PY) -m pytest -q icelake_assets_tests/test_import_graph.py

# Regenerates the snapshot of what users see in Dagster for the demo lake (review the JSON diff).
snapshots: bootstrap
	ICELAKE_UPDATE_SNAPSHOTS=1 $(PY) -m pytest -q icelake_assets_tests/test_definitions_snapshot.py

# Re-pins requirements.lock from the venv (after changing pyproject.toml's ranges and `make bootstrap`).
lock:
	@{ sed -n '1,3p' requirements.lock; .venv/bin/python -m pip freeze --exclude-editable; } > requirements.lock.new
	@mv requirements.lock.new requirements.lock && echo "requirements.lock: $$(grep -vc '^#' requirements.lock) pins"
