"""`make run LAKE=s3`: the demo lake on object storage behind an Iceberg REST catalog, then Dagster on it.

Starts SeaweedFS (`weed mini`: S3 + REST catalog, OAuth2 client credentials) on 127.0.0.1 with its data in
``<dir>/seaweedfs`` (kept across restarts), writes ``<dir>/icelake.yaml`` (the shipped settings with the
catalog replaced by that REST catalog; credentials only as ``${ICELAKE_S3_KEY}`` / ``${ICELAKE_S3_SECRET}``),
builds the degraded demo tables there if they are missing, and runs ``scripts/run_dagster.py`` with
``ICELAKE_CONFIG`` pointing at those settings. Ctrl-C / SIGTERM go to Dagster; SeaweedFS is stopped by its
PID once Dagster has exited. The embedded default (`make run`) stays SQLite + local disk.

Usage: python -m icelake_assets.demo.s3_lake [--dir .lake-s3] [--scale demo] -- <dagster dev arguments>
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import signal
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from icelake_assets.demo.seaweedfs import SeaweedFS, seaweedfs_server

CATALOG = "demo"
KEY_ENV, SECRET_ENV = "ICELAKE_S3_KEY", "ICELAKE_S3_SECRET"
REPO = Path(__file__).resolve().parents[2]


def catalog_properties(server: SeaweedFS) -> dict[str, Any]:
    """pyiceberg properties of SeaweedFS's REST catalog and S3, as a user writes them: secrets as ${VAR}.
    Spark's REST catalog and S3A options are derived from these (catalog/spark_catalog.py)."""
    return {
        "type": "rest",
        "uri": server.catalog_uri,
        "warehouse": server.warehouse,
        "s3.endpoint": server.s3_endpoint,
        "s3.region": "us-east-1",
        "s3.access-key-id": "${" + KEY_ENV + "}",
        "s3.secret-access-key": "${" + SECRET_ENV + "}",
        "auth": {
            "type": "oauth2",
            "oauth2": {
                "client_id": "${" + KEY_ENV + "}",
                "client_secret": "${" + SECRET_ENV + "}",
                "token_url": server.token_url,
            },
        },
    }


def lake_credentials(folder: Path) -> tuple[str, str]:
    """The demo store's admin keys: made once, kept in ``<folder>/credentials.json`` (mode 0600), so the
    data written under them stays readable after a restart."""
    path = folder / "credentials.json"
    if path.exists():
        saved = json.loads(path.read_text())
        return saved["key"], saved["secret"]
    key, secret = "icelake-demo", secrets.token_urlsafe(24)
    folder.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        json.dump({"key": key, "secret": secret}, out)
    return key, secret


def write_settings(base: Path, target: Path, server: SeaweedFS) -> Path:
    """The shipped settings (policies, thresholds, automation) with the S3 catalog in place of the
    embedded one."""
    settings = yaml.safe_load(base.read_text()) or {}
    settings["catalogs"] = {CATALOG: catalog_properties(server)}
    target.write_text(
        "# Written by `make run LAKE=s3` (icelake_assets/demo/s3_lake.py) at every start: SeaweedFS's\n"
        "# ports change. Edit the shipped icelake.yaml instead.\n" + yaml.safe_dump(settings, sort_keys=False)
    )
    return target


def lake_environment(key: str, secret: str, settings_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update({KEY_ENV: key, SECRET_ENV: secret, "ICELAKE_CONFIG": str(settings_path)})
    # pyarrow's AWS SDK adds checksum headers SeaweedFS does not check: only when required.
    env["AWS_REQUEST_CHECKSUM_CALCULATION"] = "when_required"
    return env


def build_lake(env: Mapping[str, str], scale: str) -> list[str]:
    """The degraded demo tables on S3 (kept when they exist). In this process, with the lake's env."""
    from icelake_assets.demo.lake import build_demo_lake
    from icelake_assets.settings import load_settings

    os.environ.update(env)
    settings = load_settings(env["ICELAKE_CONFIG"])
    return [str(ref) for ref in build_demo_lake(settings, CATALOG, scale)]


def run_dagster(env: Mapping[str, str], dagster_args: list[str]) -> int:
    """scripts/run_dagster.py in the foreground; our stop signals are forwarded to it (it stops every
    process dagster dev started), and we wait for it before stopping SeaweedFS."""
    launcher = subprocess.Popen(
        [sys.executable, str(REPO / "scripts" / "run_dagster.py"), "--", *dagster_args], env=dict(env)
    )

    def forward(signum: int, _frame: object) -> None:
        if launcher.poll() is None:
            launcher.send_signal(signum)

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, forward)
    return launcher.wait()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="s3_lake", description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, default=REPO / ".lake-s3", help="the S3 lake's folder")
    parser.add_argument("--scale", default="demo", help="demo lake scale (icelake demo-lake --scale)")
    parser.add_argument("--settings", type=Path, default=REPO / "icelake.yaml", help="settings to start from")
    parser.add_argument("--build-only", action="store_true", help="build the lake and stop (no Dagster)")
    parser.add_argument("dagster_args", nargs="*", help="after --: dagster dev arguments")
    args = parser.parse_args(argv)
    folder = args.dir.resolve()
    key, secret = lake_credentials(folder)
    with seaweedfs_server((key, secret), folder=folder / "seaweedfs") as server:
        print(
            f"s3_lake: SeaweedFS S3 at {server.s3_endpoint}, REST catalog at {server.catalog_uri}", flush=True
        )
        settings_path = write_settings(args.settings, folder / "icelake.yaml", server)
        env = lake_environment(key, secret, settings_path)
        tables = build_lake(env, args.scale)
        print(f"s3_lake: tables on s3: {', '.join(tables)}; settings: {settings_path}", flush=True)
        if args.build_only:
            return 0
        return run_dagster(env, args.dagster_args)


if __name__ == "__main__":
    sys.exit(main())
