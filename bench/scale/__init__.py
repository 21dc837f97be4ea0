"""Thousands of tables in one code location: what a sensor tick, a definitions load, a run worker
and the UI cost, against their goals and against bare Dagster.

* sensor_bench: one maintenance-sensor tick over 1,000 tables (cold, unchanged, after commits,
  restart), over the cached lake of sensor_lake.py;
* scale_bench: 10,000 tables: fresh-process definitions loads (load_child.py), covering ticks and the
  webserver's catalog and graph queries (scale_ui.py, ui_documents.py);
* definitions_bench: the product's loads and a run worker's time to its first op (run_worker.py) vs
  bare Dagster locations of the same shape (shape_spec.py, bare_shapes.py);
* definitions_builds_bench: the builds a code-server load makes, vs an earlier commit's.

Run one with ``.venv/bin/python -m bench.scale.<name> [--help]``; the lakes are generated once and
cached under bench/results/. ``make bench`` runs all but definitions_builds_bench."""
