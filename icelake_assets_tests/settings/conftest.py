"""Settings tests start from a clean pyiceberg configuration; ``write`` puts a settings file in a folder."""

import os
from pathlib import Path

import pytest

# The smallest valid catalogs section.
CAT = "catalogs:\n  c1: {type: sql, uri: 'sqlite:///c.db'}\n"


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "icelake.yaml"
    path.write_text(text)
    return path


@pytest.fixture(autouse=True)
def no_pyiceberg_config(tmp_path_factory, monkeypatch):
    """pyiceberg reads ~/.pyiceberg.yaml, $PYICEBERG_HOME, the working folder and PYICEBERG_* variables:
    every test starts with none of them."""
    empty = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(empty))
    monkeypatch.setenv("PYICEBERG_HOME", str(empty))
    monkeypatch.chdir(empty)
    for name in list(os.environ):
        if name.upper().startswith("PYICEBERG_") and name.upper() != "PYICEBERG_HOME":
            monkeypatch.delenv(name)
    return empty
