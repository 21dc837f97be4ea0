"""Spark SQL quoting of identifiers and strings."""

from __future__ import annotations

from icelake_assets.partitions.quoting import quote_identifier, sql_string


def test_identifiers_and_strings_are_quoted():
    assert quote_identifier("a`b") == "`a``b`"
    assert sql_string("it's \\ ok") == "'it\\'s \\\\ ok'"
