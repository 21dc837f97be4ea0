"""Discovery's typed result (issue 19): the tables it could read, and each catalog or table it could
not, named once, with a one-line cause that holds no secret. Real catalogs: SQLite files, a
PostgreSQL URI on a port nothing listens on, a REST server whose error echoes the token it was sent."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import yaml

from icelake_assets.catalog.discovery import DiscoveryProblem, LakeDiscovery, discover_lake
from icelake_assets.settings import load_settings
from icelake_assets_tests.broken_lake import PASSWORD, broken_lake


def _one_line_once(problem: DiscoveryProblem) -> str:
    text = str(problem)
    assert "\n" not in text, text
    assert text.count(f"catalog {problem.catalog!r}") <= 1, text  # the catalog is named once
    return text


def test_down_catalogs_and_unreadable_tables_are_named_with_their_cause(tmp_path, monkeypatch):
    lake = broken_lake(tmp_path, monkeypatch)
    found = discover_lake(lake.settings)
    assert isinstance(found, LakeDiscovery)
    assert [t.ref for t in found.tables] == [lake.bad_manifests, lake.ok, lake.far]
    down = {p.catalog: _one_line_once(p) for p in found.down_catalogs}
    assert set(down) == {"pg", "gone"}
    assert "Connection refused" in down["pg"] and PASSWORD not in down["pg"]
    assert "postgresql+psycopg2://icelake:***@127.0.0.1" in down["pg"]  # which server, not its password
    assert "/nonexistent/dir/catalog.db does not exist" in down["gone"]
    (unreadable,) = found.unreadable_tables
    text = _one_line_once(unreadable)
    assert unreadable.table == lake.truncated
    # the file at fault and what is wrong with it, without the file's content
    assert "metadata.json" in text and "EOF while parsing" in text and "input_value" not in text


class _EchoingCatalog(BaseHTTPRequestHandler):
    """An Iceberg REST catalog whose configuration answers, and whose listing fails with an error that
    echoes the request's Authorization header (as some proxies and debug servers do)."""

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        if self.path.startswith("/v1/config"):
            self._reply(200, {"defaults": {}, "overrides": {}})
        else:
            auth = self.headers.get("Authorization", "")
            self._reply(500, {"error": {"message": f"rejected {auth}", "type": "ServerError", "code": 500}})

    def _reply(self, status: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def echoing_catalog() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _EchoingCatalog)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_a_listing_error_that_echoes_a_secret_is_redacted(tmp_path, monkeypatch, echoing_catalog):
    token = "rest-t0ken-never-printed"
    monkeypatch.setenv("ICELAKE_TEST_REST_TOKEN", token)
    config = tmp_path / "icelake.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "catalogs": {
                    "rest": {"type": "rest", "uri": echoing_catalog, "token": "${ICELAKE_TEST_REST_TOKEN}"}
                }
            }
        )
    )
    found = discover_lake(load_settings(config))
    (down,) = found.down_catalogs
    text = _one_line_once(down)
    assert down.catalog == "rest" and "rejected Bearer ***" in text and token not in text
