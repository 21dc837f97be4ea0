"""Benchmarks (not part of the test suite), in rooms by what they measure:

* bench/health/: reading a lake's state: health from metadata, orphan scans, REST catalog sweeps,
  object storage against local disk;
* bench/loop/: maintenance end to end through Dagster against Iceberg's raw procedures: the demo
  lake, fleets of small tables, one big table, partial progress, query latency before and after;
* bench/scale/: thousands of tables in one code location: sensor ticks, definitions loads, run
  workers and the UI, against bare Dagster;
* bench/soak/: the chaos soak (``make soak``);
* bench/common/: what more than one room uses.

A room imports only bench/common/, and the product never imports bench/ (setup.cfg's import
contracts). ``python -m bench`` (``make bench``) runs every benchmark; ``python -m bench --list``
names them; ``python -m bench NAME [ARGS]`` runs one, as ``python -m bench.ROOM.NAME [ARGS]`` does.
Figures and commands: BENCHMARKS.md; every earlier run: bench/HISTORY.md."""
