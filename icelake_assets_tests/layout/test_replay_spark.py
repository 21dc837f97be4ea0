"""The replay against files Spark wrote (an integration test: the process's Spark session): a table
written with ORDER BY user, in several files with narrow user bounds. Laid out as sort(user) in as
many files, the replay predicts for equality lookups the files pyiceberg's scan planning plans on
the real files, within one file per lookup and a quarter of a file on average."""

from __future__ import annotations

import math
import random

from pyiceberg.expressions import EqualTo

from icelake_assets.catalog.connection import TableRef, load_table, open_catalog
from icelake_assets.layout.candidates import Candidate, lay_out, partition_ids
from icelake_assets.layout.replay import files_read, read_sample
from icelake_assets_tests.conftest import catalog_name

ROWS, USERS, TASKS = 40_000, 400, 8


def test_replay_predicts_the_files_planned_on_spark_sorted_files(make_lake, spark_for):
    settings = make_lake()
    name = catalog_name(settings)
    open_catalog(settings, name, create=True)
    spark = spark_for(settings)
    table = f"`{name}`.`ns`.`events`"
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS `{name}`.`ns`")
    spark.sql(f"CREATE TABLE {table} (id bigint, user string) USING iceberg")
    saved = {k: spark.conf.get(k) for k in ("spark.sql.shuffle.partitions", "spark.sql.adaptive.enabled")}
    spark.conf.set("spark.sql.shuffle.partitions", str(TASKS))
    spark.conf.set("spark.sql.adaptive.enabled", "false")  # one file per sort task, not coalesced
    try:
        spark.sql(
            f"INSERT INTO {table} SELECT id, concat('u', lpad(cast(pmod(id * 7919, {USERS}) AS string), 4, '0')) "
            f"AS user FROM range({ROWS}) ORDER BY user"
        )
    finally:
        for key, value in saved.items():
            spark.conf.set(key, value)
    events = load_table(open_catalog(settings, name), TableRef(name, ("ns",), "events"))
    real_files = len(list(events.scan().plan_files()))
    assert real_files >= 4, "Spark wrote too few files to compare layouts"

    sample = read_sample(events, ("id", "user"), 200_000)
    schema = events.schema()
    parts = partition_ids(sample, schema, events.spec())
    laid = lay_out(sample, schema, parts, Candidate("sort", ("user",)), math.ceil(ROWS / real_files))
    assert len(laid.files) == real_files

    users = [f"u{n:04d}" for n in random.Random(3).sample(range(USERS), 40)]
    predicted = [files_read(laid, schema, EqualTo(term="user", value=u)) for u in users]
    planned = [len(list(events.scan(row_filter=EqualTo(term="user", value=u)).plan_files())) for u in users]
    assert all(abs(p - q) <= 1 for p, q in zip(predicted, planned, strict=True)), (predicted, planned)
    assert abs(sum(predicted) - sum(planned)) / len(users) <= 0.25
    assert sum(planned) / len(users) < 2 < real_files  # sorted: a lookup reads one file or two
