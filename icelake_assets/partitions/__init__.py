"""Iceberg partitions, free of Dagster: a table's layout (:mod:`.layout`), the partition values a
partition of health's stats stands for (:mod:`.values`), the Spark ``where`` of a run's scope
(:mod:`.filters`, quoted by :mod:`.quoting`), and values as partition key strings (:mod:`.keys`).
orchestration/tables/partitions.py builds the Dagster partitions definitions and backfill plumbing on them.

Vocabulary:

* a table's :class:`PartitionLayout` describes its current (default) spec, the fields of every
  spec that still has live files, and, per time field, its earliest partition;
* its *dimensions* (:func:`dimension_fields`) are the fields a run can be scoped by: the only field;
  two fields when at most one is a time field; else the first time field, else the first field;
* a partition is addressed by its dimensions' values as Iceberg's *human strings*
  (``to_human_string``: ``2024-01-03`` for day, ``2024-01-03-05`` for hour, ``2024-01`` for month,
  ``2024`` for year, the value itself for identity/truncate, the bucket number for bucket),
  ``None`` for null.

Filters are written on the *source columns* (``ts >= TIMESTAMP '…' AND ts < TIMESTAMP '…'``,
``col = '…'``, ``catalog.system.bucket(16, col) = 3``) rather than on partition tuples, so Iceberg
projects them onto every spec of the table. Evolved specs, explicitly:

* the definition follows the *current* spec (what writers produce now);
* files of an older spec are in a partition of the run when that spec has the dimension's field
  (same source column and transform) or a finer time transform of the same column
  (old ``day`` files count in the current ``month`` partition that holds their day);
* files of an older spec without that field (e.g. written before the table was partitioned, or at a
  coarser time grain) belong to no single partition: only whole-table (non-partitioned) runs
  compact them. A scoped ``where`` may still select such a file when its column bounds overlap the
  scope; Iceberg then rewrites the whole file into the current spec (rows are kept, never lost).
"""
