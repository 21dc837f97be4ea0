"""The scale benchmark's UI (bench/scale/scale_bench.py, its step 3): ``dagster-webserver -m
icelake_assets.definitions`` on a free 127.0.0.1 port (its own DAGSTER_HOME), the time until the code
location is loaded, then the GraphQL queries the asset catalog and asset graph pages send (documents
read from the installed UI bundle, bench/scale/ui_documents.py), UI_REPEAT times each."""

from __future__ import annotations

import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.scale.children import ROOT  # the checkout: the webserver's working directory
from bench.scale.load_child import MODULE

UI_REPEAT = 3
RECORDS_BATCH = 1000  # the UI's page size for AssetRecordsQuery (useAllAssets.tsx DEFAULT_BATCH_LIMIT)
HEALTH_BATCH = 250  # AssetHealthDataProvider.tsx BATCH_SIZE: keys per query for the visible rows


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def graphql(url: str, query: str, variables: dict[str, Any], timeout: float = 600) -> tuple[dict, int]:
    body = json.dumps({"query": query, "variables": variables}).encode()
    request = urllib.request.Request(url, body, {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=timeout) as response:
        raw = response.read()
    return json.loads(raw), len(raw)


LOCATION_STATE = """query BenchLocationState {
  workspaceOrError { ... on Workspace { locationEntries { name loadStatus
    locationOrLoadError { __typename ... on PythonError { message } } } } }
}"""


@dataclass
class Query:
    operation: str
    page: str  # which page sends it
    seconds: list[float] = field(default_factory=list)
    size: int = 0
    requests: int = 0
    count: int | None = None  # assets (or entries) in the answer


class Webserver:
    """``dagster-webserver`` in its own process group (its code server is a child): killed at exit."""

    def __init__(self, folder: Path, env: dict[str, str]) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/graphql"
        home = folder / "dagster_home"
        home.mkdir()
        self.log = folder / "webserver.log"
        exe = Path(sys.executable).parent / "dagster-webserver"
        self.started = time.perf_counter()
        with self.log.open("w") as log:
            self.proc = subprocess.Popen(
                [str(exe), "-m", MODULE, "-h", "127.0.0.1", "-p", str(self.port)],
                env={**env, "DAGSTER_HOME": str(home)},
                cwd=ROOT,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def wait_loaded(self, timeout: float) -> tuple[float, str]:
        """Seconds from start until the code location is loaded, and its name."""
        deadline = self.started + timeout
        while time.perf_counter() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"dagster-webserver exited ({self.proc.returncode}):\n{self.tail()}")
            try:
                data, _ = graphql(self.url, LOCATION_STATE, {}, timeout=30)
            except OSError:
                time.sleep(0.25)
                continue
            entries = data.get("data", {}).get("workspaceOrError", {}).get("locationEntries", [])
            for e in entries:
                state = e.get("locationOrLoadError") or {}
                if state.get("__typename") == "PythonError":
                    raise RuntimeError(f"code location {e['name']} failed to load: {state['message']}")
                if e.get("loadStatus") == "LOADED" and state.get("__typename") == "RepositoryLocation":
                    return time.perf_counter() - self.started, e["name"]
            time.sleep(0.25)
        raise TimeoutError(f"the code location did not load within {timeout:.0f}s:\n{self.tail()}")

    def tail(self) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-30:])

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


def _errors(data: dict, operation: str) -> None:
    if data.get("errors"):
        raise RuntimeError(f"{operation}: GraphQL errors: {json.dumps(data['errors'])[:2000]}")


def _union(data: dict, path: Iterable[str], operation: str) -> dict:
    """``data`` at ``path``; a PythonError there (the union's error member) is a failure."""
    node = data["data"]
    for name in path:
        node = node[name]
    if node.get("__typename") == "PythonError" or "message" in node and "stack" in node:
        raise RuntimeError(f"{operation}: {node.get('message')}")
    return node


def time_ui(url: str, location: str, keys: list[list[str]]) -> list[Query]:
    """The catalog and graph pages' queries, ``UI_REPEAT`` times each (paged ones: every page)."""
    from bench.scale.ui_documents import document

    sample = [{"path": k} for k in keys[:HEALTH_BATCH]]

    def once(name: str, variables: dict[str, Any]) -> tuple[dict, int]:
        data, size = graphql(url, document(name), variables)
        _errors(data, name)
        return data, size

    def status() -> tuple[int, int, int]:
        data, size = once("CodeLocationStatusQuery", {})
        return len(_union(data, ["locationStatusesOrError"], "status")["entries"]), size, 1

    def workspace() -> tuple[int, int, int]:
        data, size = once("LocationWorkspaceQuery", {"name": location})
        entry = _union(data, ["workspaceLocationEntryOrError"], "workspace")["locationOrLoadError"]
        repos = entry["repositories"]
        return sum(len(r["pipelines"]) for r in repos), size, 1

    def workspace_assets() -> tuple[int, int, int]:
        data, size = once("LocationWorkspaceAssetsQuery", {"name": location})
        entry = _union(data, ["workspaceLocationEntryOrError"], "assets")["locationOrLoadError"]
        return sum(len(r["assetNodes"]) for r in entry["repositories"]), size, 1

    def paged(name: str, root: str, items: str) -> Callable[[], tuple[int, int, int]]:
        def run() -> tuple[int, int, int]:
            cursor, count, size, pages = None, 0, 0, 0
            while True:
                data, got = once(name, {"cursor": cursor, "limit": RECORDS_BATCH})
                conn = _union(data, [root], name)
                batch = conn[items]
                count, size, pages = count + len(batch), size + got, pages + 1
                cursor = conn.get("cursor")
                if len(batch) < RECORDS_BATCH or cursor is None:
                    return count, size, pages

        return run

    def health() -> tuple[int, int, int]:
        data, size = once("AssetHealthQuery", {"assetKeys": sample})
        return len(_union(data, ["assetsOrError"], "health")["nodes"]), size, 1

    def live() -> tuple[int, int, int]:
        data, size = once("AssetGraphLiveQuery", {"assetKeys": sample})
        return len(data["data"]["assetNodes"]), size, 1

    plan: list[tuple[Query, Callable[[], tuple[int, int, int]]]] = [
        (Query("CodeLocationStatusQuery", "every page (workspace status)"), status),
        (Query("LocationWorkspaceQuery", "every page (jobs, sensors, schedules)"), workspace),
        (Query("LocationWorkspaceAssetsQuery", "catalog + graph (every asset node)"), workspace_assets),
        (
            Query("AssetRecordsQuery", f"catalog (asset records, pages of {RECORDS_BATCH})"),
            paged("AssetRecordsQuery", "assetRecordsOrError", "assets"),
        ),
        (
            Query("AssetCatalogTableQuery", f"catalog table (pages of {RECORDS_BATCH})"),
            paged("AssetCatalogTableQuery", "assetsOrError", "nodes"),
        ),
        (Query("AssetHealthQuery", f"catalog rows (one batch: {len(sample)} keys)"), health),
        (Query("AssetGraphLiveQuery", f"graph nodes' live data ({len(sample)} keys)"), live),
    ]
    for query, run in plan:
        for _ in range(UI_REPEAT):
            started = time.perf_counter()
            count, size, requests = run()
            query.seconds.append(time.perf_counter() - started)
            query.count, query.size, query.requests = count, size, requests
        print(f"  {query.operation}: {statistics.median(query.seconds) * 1000:.0f} ms", flush=True)
    return [q for q, _ in plan]
