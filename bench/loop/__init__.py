"""The product's maintenance end to end through Dagster, against Iceberg's own procedures called raw
(the work with nothing around it) or against the bound a user was promised.

* loop_bench: the degraded demo lake healed by the sensor vs one manual maintenance of every table;
* fleet_bench: small degraded tables healed by the sensor (packed runs, one resident Spark driver,
  make run's code servers: code_servers.py) vs the raw procedures in one Spark session;
* fleet_mix_bench: 2 large and 100 small tables: the longest wait of a small one against its bound;
* big_table_bench: one 20,000-file table, the product's run vs raw ``rewrite_data_files`` +
  ``rewrite_manifests``, step by step;
* compaction_bench: 20,000 small files compacted with partial progress in one run;
* query_bench: the latency of users' queries (Spark and DuckDB) before and after maintenance.

Run one with ``.venv/bin/python -m bench.loop.<name> [--help]``; each starts Spark (minutes to half
an hour: see BENCHMARKS.md). ``make bench`` runs them all."""
