"""Reading a lake's state, against what a user would run instead.

* health_bench: cold and incremental health evaluation from metadata vs Spark's ``files`` GROUP BY
  and pyiceberg's ``inspect.files()`` (20,000 and 100,000 files);
* object_store_bench: health, an orphan scan and a rewrite on SeaweedFS (S3 + an Iceberg REST
  catalog) vs local disk;
* orphan_scan_bench: orphan removal's safety rules (listing every known table, a scan, the
  verification after removal);
* partition_checks_bench: checks per partition of a table of 3,650 daily partitions (the first report,
  an unchanged tick, one changed partition: evaluations, seconds, event log bytes) and definitions
  loads of 100 partitioned tables with them on vs off;
* orphan_rules_bench: the orphan scan's rules against the rest of the lake, every other table vs the
  index of near ones (200 and 2,000 tables);
* sweep_bench: 2,000 REST tables' metadata locations behind a 30 ms catalog (latency_proxy.py), one by
  one vs ``automation.catalog_concurrency`` workers.

Run one with ``.venv/bin/python -m bench.health.<name> [--help]`` (object_store_bench and sweep_bench
under ``flock /tmp/icelake-spark.lock``); ``make bench`` runs all but orphan_scan_bench."""
