"""The command line itself (cli.py): table names in the forms people copy, a missing table is an
error, and `icelake --help` loads no heavy library (issue 22)."""

from __future__ import annotations

import subprocess
import sys

import pyarrow as pa
import pytest

from icelake_assets.catalog.connection import open_catalog
from icelake_assets.cli import main, parse_table
from icelake_assets.types import TableRef
from icelake_assets_tests.conftest import catalog_name


def test_table_names_in_iceberg_and_ui_forms(make_lake):
    settings = make_lake()
    name = catalog_name(settings)
    expected = TableRef(name, ("demo", "taxi"), "trips")
    assert parse_table(f"{name}.demo.taxi.trips", settings) == expected
    assert parse_table(f"{name}/demo/taxi/trips", settings) == expected  # the UI's asset key
    assert parse_table(f"/{name}/demo/taxi/trips/", settings) == expected
    assert parse_table("ns.t", settings) == TableRef(name, ("ns",), "t")
    with pytest.raises(ValueError, match="invalid table name"):
        parse_table("a//b", settings)


def test_policy_of_a_missing_table_exits_non_zero_and_of_an_existing_one_zero(make_lake, capsys):
    settings = make_lake()
    name = catalog_name(settings)
    cat = open_catalog(settings, name, create=True)
    cat.create_namespace("ns")
    cat.create_table(("ns", "t"), pa.schema([("id", pa.int64())]))
    assert main(["--config", settings.source, "policy", f"{name}/ns/t"]) == 0
    assert f"policy of {name}.ns.t" in capsys.readouterr().out
    assert main(["--config", settings.source, "policy", f"{name}.ns.nope"]) == 1
    assert f"{name}.ns.nope does not exist" in capsys.readouterr().err


def test_the_command_line_loads_no_heavy_library_until_a_command_needs_it():
    code = (
        "import sys, icelake_assets.cli as c\n"
        "heavy = [m for m in ('pyiceberg', 'pyarrow', 'dagster', 'pyspark', 'pandas') if m in sys.modules]\n"
        "print(','.join(heavy))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == ""
    help_text = subprocess.run(
        [sys.executable, "-m", "icelake_assets.cli", "--help"], capture_output=True, text=True, check=True
    ).stdout
    assert "catalog/namespace/table" in help_text or "health" in help_text
