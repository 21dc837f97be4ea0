"""What the catalog list and the lineage node show of a table without opening it: the description's
first line says where the table's health is and how its colours read."""

from dataclasses import replace

from icelake_assets.orchestration.assets.description import HEALTH_LEGEND, describe
from icelake_assets_tests.conftest import discovered_table


def test_the_first_line_of_a_tables_description_says_how_to_read_its_health():
    table = discovered_table("trips")
    first = describe(table).split("\n")[0]
    assert first == f"Iceberg table `{table.ref}`; {HEALTH_LEGEND}."
    assert "red Critical" in first and "yellow Warning" in first
    commented = replace(table, properties={"comment": "Taxi trips.\nOne row per ride."})
    lines = describe(commented).split("\n")
    assert lines[0] == f"Taxi trips; {HEALTH_LEGEND}."
    assert "One row per ride." in lines[2:]  # the whole comment is kept below the first line
