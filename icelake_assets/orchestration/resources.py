"""Resources: the lake (settings, catalogs, metadata statistics) and Spark (Iceberg-enabled)."""

from __future__ import annotations

import threading
from typing import Optional

from dagster import ConfigurableResource
from dagster_pyspark import LazyPySparkResource
from pydantic import PrivateAttr
from pyiceberg.catalog import Catalog
from pyiceberg.table import Table
from pyspark.sql import SparkSession

from icelake_assets.catalog.connection import TableRef, load_table, open_catalog
from icelake_assets.health.stats import ManifestCache, TableStats, compute_table_stats
from icelake_assets.maintenance.spark_session import SparkSetupError
from icelake_assets.settings import Policy, Settings, load_settings

# Manifests are immutable: one cache per process serves checks, sensors and ops alike.
_MANIFEST_CACHE = ManifestCache()
_LOCK = threading.Lock()


class IcelakeResource(ConfigurableResource):
    """Settings, catalogs and health statistics of the lake.

    ``config_path`` names the settings file; empty means ``$ICELAKE_CONFIG`` or ``./icelake.yaml``."""

    config_path: Optional[str] = None
    _settings: Optional[Settings] = PrivateAttr(default=None)
    _catalogs: dict = PrivateAttr(default_factory=dict)

    @property
    def settings(self) -> Settings:
        if self._settings is None:
            self._settings = load_settings(self.config_path)
        return self._settings

    def catalog(self, name: str) -> Catalog:
        if name not in self._catalogs:
            self._catalogs[name] = open_catalog(self.settings, name)
        return self._catalogs[name]

    def load_table(self, ref: TableRef) -> Table:
        return load_table(self.catalog(ref.catalog), ref)

    def policy(self, table: Table) -> Policy:
        return self.settings.policy_for(table.properties)

    def stats(self, table: Table, policy: Policy | None = None) -> TableStats:
        with _LOCK:
            return compute_table_stats(table, policy or self.policy(table), _MANIFEST_CACHE)


class IcebergSparkResource(LazyPySparkResource):
    """dagster-pyspark's lazy session (no JVM until an op needs it) plus a guard: ``getOrCreate``
    reuses a live session and silently ignores new config, so catalogs missing from a live session
    are registered at runtime and a conflicting one is an error instead of a surprise."""

    _checked: bool = PrivateAttr(default=False)

    @property
    def spark_session(self) -> SparkSession:
        session: SparkSession = super().spark_session
        if not self._checked:
            for key, value in self.spark_config.items():
                if not key.startswith("spark.sql.catalog."):
                    continue
                current = session.conf.get(key, None)
                if current is None:
                    session.conf.set(key, str(value))
                elif current != str(value):
                    raise SparkSetupError(
                        f"a live Spark session has {key}={current!r}, not {value!r}: stop it or use another catalog name"
                    )
            self._checked = True
        return session
