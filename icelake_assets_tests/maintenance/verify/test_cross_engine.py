"""Cross-engine reads without Spark: DuckDB (extensions from the wheels, offline) and pyiceberg agree
on a table written by pyiceberg; the checksum column is chosen the same way for every engine."""

import pyarrow as pa
import pytest
from pyiceberg.schema import Schema
from pyiceberg.types import DoubleType, LongType, NestedField, StringType

from icelake_assets.catalog.connection import open_catalog
from icelake_assets.maintenance.verify.cross_engine import (
    CrossEngineError,
    CrossEngineResult,
    EngineRead,
    checksum_column,
    duckdb_read,
    extension_path,
    pyiceberg_read,
)
from icelake_assets_tests.conftest import catalog_name


@pytest.fixture
def table(make_lake):
    settings = make_lake()
    cat = open_catalog(settings, catalog_name(settings), create=True)
    cat.create_namespace("ns")
    schema = Schema(
        NestedField(1, "x", DoubleType()),
        NestedField(2, "name", StringType()),
        NestedField(3, "id", LongType()),
    )
    t = cat.create_table(("ns", "t"), schema)
    for i in range(3):
        ids = pa.array([i, 100 + i], pa.int64())
        t.append(pa.table({"x": [0.5, None], "name": ["é", "abc"], "id": ids}))
    return t


def test_duckdb_and_pyiceberg_agree(table):
    assert checksum_column(table) == ("id", "sum")
    assert duckdb_read(table, "id", "sum") == EngineRead("duckdb", 6, 306)
    assert pyiceberg_read(table, "id", "sum", None) == EngineRead("pyiceberg", 6, 306)
    # characters, not bytes: 'é' counts 1
    duck, pyice = duckdb_read(table, "name", "length"), pyiceberg_read(table, "name", "length", None)
    assert duck.checksum == pyice.checksum == 12


def test_a_disagreement_is_not_ok_and_a_missing_extension_is_named():
    same = CrossEngineResult("id", "sum", (EngineRead("spark", 6, 3), EngineRead("duckdb", 6, 3)))
    assert same.ok
    assert not CrossEngineResult("id", "sum", (EngineRead("spark", 6, 3), EngineRead("duckdb", 5, 3))).ok
    with pytest.raises(CrossEngineError, match="not_a_duckdb_extension_pkg"):
        extension_path("not_a_duckdb_extension_pkg")
