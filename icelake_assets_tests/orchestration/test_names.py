"""Any legal Iceberg name works (issue 10 item 7): quotes, accents and names that differ only in
characters Dagster refuses load, get distinct op/job names, and are maintained and checked."""

from pathlib import Path

import pyarrow as pa
from dagster import DagsterInstance
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField

from icelake_assets.catalog.connection import TableRef, dagster_name, open_catalog
from icelake_assets.orchestration.project import CHECKS_JOB, MAINTENANCE_JOB, build_definitions
from icelake_assets_tests.conftest import catalog_name

NAMES = ("o'brien", "café", "my-table", "my_table")


def test_safe_names_are_valid_distinct_and_readable():
    refs = [TableRef("c", ("ns",), n) for n in NAMES] + [
        TableRef("c", ("a", "b"), "c"),
        TableRef("c", ("a",), "b.c"),
    ]
    names = [r.safe_name for r in refs]
    assert len(set(names)) == len(names)
    assert all(n.replace("_", "").isalnum() and n.isascii() for n in names)
    assert names[0].startswith("c__ns__o_brien_") and names[2].startswith("c__ns__my_table_")
    assert dagster_name(["x" * 500]).startswith("x" * 64 + "_") and len(dagster_name(["x" * 500])) == 75
    assert TableRef.parse("c.ns.o'brien") == refs[0] and TableRef.parse("c.ns.café") == refs[1]


def test_tables_with_any_legal_name_load_run_their_checks_and_maintenance(make_lake):
    settings = make_lake()
    cat = open_catalog(settings, catalog_name(settings), create=True)
    cat.create_namespace("ns")
    warehouse = Path(settings.source).parent / "lake" / "warehouse"
    for i, name in enumerate(NAMES):
        # pyarrow cannot write under a non-ASCII file URI: an ASCII location, the Iceberg name unchanged.
        table = cat.create_table(
            ("ns", name), Schema(NestedField(1, "id", LongType())), location=str(warehouse / f"t{i}")
        )
        for j in range(25 if name == "o'brien" else 1):  # o'brien is over the small-file threshold
            table.append(pa.table({"id": pa.array([j], pa.int64())}))
    defs = build_definitions(settings)
    defs.get_repository_def()  # the code location loads
    instance = DagsterInstance.ephemeral()
    checks = defs.resolve_job_def(CHECKS_JOB).execute_in_process(instance=instance)
    assert checks.success
    assert {e.asset_key.path[-1] for e in checks.get_asset_check_evaluations()} == {*NAMES, "health_overview"}

    result = defs.resolve_job_def(MAINTENANCE_JOB).execute_in_process(instance=instance)
    assert result.success
    assert sorted(e.asset_key.path[-1] for e in result.get_asset_materialization_events()) == sorted(NAMES)
    obrien = cat.load_table(("ns", "o'brien"))
    assert len(list(obrien.scan().plan_files())) == 1 and obrien.scan().to_arrow().num_rows == 25
