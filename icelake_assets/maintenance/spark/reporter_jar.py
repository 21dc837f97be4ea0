"""The scan reporter jar (docs/layout.md, "Collecting scan reports"): where it is, and its build from
the Java source the package ships (icelake_assets/layout/reporter/), with the JDK's ``javac`` against
the Iceberg runtime jar and pyspark's jars. ``scripts/bootstrap.sh`` runs ``python -m
icelake_assets.maintenance.spark.reporter_jar``; nothing is downloaded, and nothing is built when the
jar is newer than its source."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from icelake_assets.maintenance.spark.jars import SparkSetupError, iceberg_runtime_jar, jars_dir

REPORTER_CLASS = "io.icelake.reports.IcelakeScanReportWriter"
REPORTER_JAR = "icelake-scan-reporter.jar"
# The catalog property the reporter reads its directory from (the Java source's DIR_PROPERTY).
DIR_PROPERTY = "icelake.scan-reports-dir"
BUILD_COMMAND = f"{Path(sys.executable).name} -m icelake_assets.maintenance.spark.reporter_jar"


def reporter_source() -> Path:
    import icelake_assets.layout

    return Path(icelake_assets.layout.__file__).parent / "reporter" / "IcelakeScanReportWriter.java"


def reporter_jar_path() -> Path:
    return jars_dir() / REPORTER_JAR


def built_reporter_jar() -> str | None:
    """The jar's path when it was built (the product's sessions then carry it, reporting on or off:
    a live session cannot load a jar later, when a catalog that reports is registered at runtime)."""
    jar = reporter_jar_path()
    return str(jar) if jar.is_file() else None


def require_reporter_jar() -> str:
    """The jar, or a :class:`SparkSetupError` saying how to build it."""
    jar = built_reporter_jar()
    if jar is None:
        raise SparkSetupError(
            f"scan_reports.dir is set but the scan reporter jar {reporter_jar_path()} is missing: "
            f"build it with `{BUILD_COMMAND}` (needs a JDK's javac, Debian openjdk-17-jdk-headless; "
            "scripts/bootstrap.sh does both), or unset scan_reports.dir"
        )
    return jar


def _pyspark_jars() -> str:
    import pyspark

    return str(Path(pyspark.__file__).parent / "jars" / "*")


def build(force: bool = False) -> Path:
    """Compile the reporter into ``jars_dir()``; a no-op when the jar is newer than the source."""
    source, jar = reporter_source(), reporter_jar_path()
    if not force and jar.is_file() and jar.stat().st_mtime >= source.stat().st_mtime:
        return jar
    javac, jar_tool = shutil.which("javac"), shutil.which("jar")
    if javac is None or jar_tool is None:
        raise SparkSetupError(
            "javac and jar are needed to build the scan reporter: install Debian's openjdk-17-jdk-headless"
        )
    classpath = f"{iceberg_runtime_jar()}:{_pyspark_jars()}"
    jar.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="icelake-reporter-") as tmp:
        classes = Path(tmp) / "classes"
        run = lambda *cmd: subprocess.run(cmd, check=True, capture_output=True, text=True)  # noqa: E731
        try:
            run(javac, "--release", "17", "-nowarn", "-cp", classpath, "-d", str(classes), str(source))
            partial = jar.with_name(f".{jar.name}.part")  # an interrupted build leaves no half jar
            run(jar_tool, "cf", str(partial), "-C", str(classes), ".")
        except subprocess.CalledProcessError as err:
            raise SparkSetupError(f"building {jar.name} failed: {err.stderr or err.stdout}") from err
        partial.replace(jar)
    return jar


def main(argv: list[str] | None = None) -> int:
    force = "--force" in (argv if argv is not None else sys.argv[1:])
    try:
        before = reporter_jar_path().stat().st_mtime if reporter_jar_path().is_file() else None
        jar = build(force=force)
    except SparkSetupError as err:
        print(f"bootstrap: {err}", file=sys.stderr)
        return 1
    if before != jar.stat().st_mtime:
        print(f"bootstrap: built the scan reporter {jar}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
