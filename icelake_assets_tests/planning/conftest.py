"""Planning decides from table facts: its tests that need real tables take health's pyiceberg tables."""

from icelake_assets_tests.health.conftest import catalog, lake, new_table

__all__ = ["catalog", "lake", "new_table"]
