"""Spark SQL quoting: every identifier and value reaches Spark quoted, nothing is pasted (partition
filters and maintenance's procedure calls share it)."""

from __future__ import annotations


def quote_identifier(part: str) -> str:
    """A Spark SQL identifier in backticks; a backtick inside is doubled."""
    return "`" + part.replace("`", "``") + "`"


def sql_string(value: str) -> str:
    """A Spark SQL string literal; backslashes and quotes escaped (Spark unescapes literals)."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
