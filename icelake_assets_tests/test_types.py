"""Every error the package raises on purpose shares one base, IcelakeError, and keeps its old base."""

import importlib
import inspect
import pkgutil

import icelake_assets
from icelake_assets.catalog.connection import CatalogUnavailableError, TableMissingError
from icelake_assets.policies import PolicyError
from icelake_assets.settings import SettingsError
from icelake_assets.types import IcelakeError


def _package_errors() -> list[type[BaseException]]:
    found = []
    for info in pkgutil.walk_packages(icelake_assets.__path__, "icelake_assets."):
        if info.name.endswith(("__main__", ".definitions")):  # definitions loads the demo lake
            continue
        module = importlib.import_module(info.name)
        found += [
            c
            for _, c in inspect.getmembers(module, inspect.isclass)
            if issubclass(c, BaseException) and c.__module__ == info.name
        ]
    return found


def test_every_package_error_is_an_icelake_error():
    errors = _package_errors()
    assert len(errors) >= 13  # the nine families and their subclasses
    assert [e.__qualname__ for e in errors if not issubclass(e, IcelakeError)] == []


def test_callers_catching_the_old_bases_still_catch_them():
    assert issubclass(SettingsError, ValueError) and issubclass(PolicyError, ValueError)
    assert issubclass(CatalogUnavailableError, RuntimeError) and issubclass(TableMissingError, LookupError)
    try:
        raise PolicyError("bad policy")
    except IcelakeError as err:
        assert str(err) == "bad policy"
