"""Where the product's jars are: the Iceberg Spark runtime (from PyPI's snowpark-connect-deps-iceberg
wheel) and the folder of the jars bootstrap installs or builds (S3A, the scan reporter). Apart from
session.py so that what builds a jar (reporter_jar.py) and what configures Spark with it do not
import each other."""

from __future__ import annotations

import glob
import os
import sys
from pathlib import Path

from icelake_assets.types import IcelakeError

ICEBERG_RUNTIME_JAR = "iceberg-spark-runtime-3.5_2.12-*.jar"
JARS_DIR_ENV = "ICELAKE_JARS_DIR"


class SparkSetupError(IcelakeError, RuntimeError):
    """Spark cannot be configured on this machine (a jar or driver is missing)."""


def iceberg_runtime_jar() -> str:
    """The Iceberg Spark runtime jar shipped by the snowpark-connect-deps-iceberg wheel."""
    try:
        import snowpark_connect_deps_iceberg as pkg
    except ImportError as err:
        raise SparkSetupError(
            "the Iceberg Spark runtime is missing: install snowpark-connect-deps-iceberg==1.0.2 "
            "or set spark.packages in the settings"
        ) from err
    roots = [Path(p) for p in getattr(pkg, "__path__", [])]
    jars = sorted(
        j for root in roots for j in glob.glob(str(root / "**" / ICEBERG_RUNTIME_JAR), recursive=True)
    )
    if not jars:
        raise SparkSetupError(f"no {ICEBERG_RUNTIME_JAR} inside {roots}")
    return jars[-1]


def jars_dir() -> Path:
    """Where the product's extra jars live: ``$ICELAKE_JARS_DIR``, else ``<venv>/share/icelake-jars``."""
    return Path(os.environ.get(JARS_DIR_ENV) or Path(sys.prefix) / "share" / "icelake-jars")
