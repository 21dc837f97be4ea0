#!/usr/bin/env bash
# Installs whatever is missing on a fresh machine (Debian packages, the venv); fast when all is there.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v java >/dev/null 2>&1 || need_apt+=(openjdk-17-jre-headless)
# javac and jar: the scan reporter is built from its source below (docs/layout.md).
command -v javac >/dev/null 2>&1 || need_apt+=(openjdk-17-jdk-headless)
[ -f /usr/share/java/sqlite-jdbc.jar ] || need_apt+=(libxerial-sqlite-jdbc-java)
ls /usr/lib/*-linux-gnu/jni/libsqlitejdbc.so >/dev/null 2>&1 || need_apt+=(libxerial-sqlite-jdbc-jni)
# PostgreSQL: the JDBC driver for a catalog in PostgreSQL, and the server the tests start (initdb, pg_ctl).
[ -f /usr/share/java/postgresql.jar ] || need_apt+=(libpostgresql-jdbc-java)
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need_apt+=(postgresql)
# Headless browser of the UI test (Playwright drives it: its own browser download is not used).
[ -x /usr/bin/chromium ] || need_apt+=(chromium)
# promtool: the tests check and unit-test the alert rules in deploy/prometheus/.
command -v promtool >/dev/null 2>&1 || need_apt+=(prometheus)
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "bootstrap: installing Debian packages: ${need_apt[*]}"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  echo "bootstrap: creating .venv"
  "$PY" -m venv .venv
fi
# Reinstall only when the dependency list changed since the last install.
stamp=.venv/.icelake-installed
# Versions come from requirements.lock (pip constraints): a fresh machine installs what CI ran.
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ] || [ requirements.lock -nt "$stamp" ]; then
  echo "bootstrap: installing Python dependencies into .venv (pinned by requirements.lock)"
  .venv/bin/python -m pip install -q --upgrade pip
  .venv/bin/python -m pip install -q -c requirements.lock -e ".[test]"
  touch "$stamp"
fi
# A lake on S3 (README "Your own lake"): Hadoop's S3A jars for Spark, extracted once from PyPI's
# sagemaker-pyspark sdist into .venv/share/icelake-jars (Maven may be unreachable). SeaweedFS's `weed`
# (tests) and DuckDB's httpfs come with the Python dependencies above.
.venv/bin/python scripts/install_s3_jars.py
# The scan reporter jar, compiled from icelake_assets/layout/reporter/ against the Iceberg runtime and
# pyspark's jars into the same folder; rebuilt only when its source is newer than the jar.
.venv/bin/python -m icelake_assets.maintenance.spark.reporter_jar
