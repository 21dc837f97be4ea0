"""The settings' agents section and the errors of agents/ (no server): a literal token is refused, a
token never prints, an identity not named reads only, every secret of the settings is masked."""

from __future__ import annotations

import pytest
import yaml

from icelake_assets.agents.errors import error_body, secret_values
from icelake_assets.agents.guardrails import GuardRefused, may_write
from icelake_assets.catalog.connection import TableMissingError
from icelake_assets.settings import SettingsError, load_settings

TOKEN = "tok-" + "a1b2c3d4" * 4


def _settings(tmp_path, monkeypatch, token: str):
    monkeypatch.setenv("AGENT_TOKEN", TOKEN)
    monkeypatch.setenv("CAT_PASSWORD", "hunter2-catalog")
    path = tmp_path / "icelake.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "catalogs": {"c": {"type": "sql", "uri": "postgresql://u:${CAT_PASSWORD}@db/x"}},
                "agents": {"bot": {"write": True, "token": token}, "reader": {}},
            }
        )
    )
    return load_settings(path)


def test_a_token_is_a_reference_and_never_prints(tmp_path, monkeypatch):
    with pytest.raises(SettingsError, match=r"agents.bot.token: a literal secret is refused"):
        _settings(tmp_path, monkeypatch, TOKEN)
    settings = _settings(tmp_path, monkeypatch, "${AGENT_TOKEN}")
    assert settings.agents["bot"].token == TOKEN and TOKEN not in repr(settings)
    assert may_write(settings, "bot") and not may_write(settings, "reader") and not may_write(settings, "who")
    assert set(secret_values(settings)) >= {TOKEN, "hunter2-catalog"}


def test_errors_name_their_kind_and_guard():
    refused = error_body("approve_maintenance", GuardRefused("max_rewrite_bytes_per_day", "over the cap"))
    assert refused == {
        "schema": "icelake.error/v1",
        "error": {
            "kind": "refused",
            "tool": "approve_maintenance",
            "message": "over the cap",
            "guard": "max_rewrite_bytes_per_day",
        },
    }
    wrapped = RuntimeError("Error executing tool plan")
    wrapped.__cause__ = TableMissingError("table c.ns.t does not exist")
    assert error_body("plan", wrapped)["error"]["kind"] == "internal"  # only the SDK's wrappers are unwrapped
    assert error_body("plan", KeyError("x"))["error"]["kind"] == "bad_argument"
