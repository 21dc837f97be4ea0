"""Loading the settings: one YAML file, ``${VAR}`` interpolation, pyiceberg's configuration, paths.

The file is found through ``$ICELAKE_CONFIG``, else ``./icelake.yaml``; when neither exists the
embedded default (a SQLite SQL catalog plus a local warehouse under ``./.lake``) is used, so the demo
needs no server. Relative paths in catalog properties are resolved against the file's folder.

Catalog connections are pyiceberg's own: ``.pyiceberg.yaml`` and ``PYICEBERG_CATALOG__<NAME>__<KEY>``
variables are read by pyiceberg's ``Config`` and merged under the file's ``catalogs`` (the file wins,
as in ``load_catalog``). Secrets come from the environment only: a literal secret in the file is refused
(:func:`~icelake_assets.settings.redaction.literal_secrets`), write ``${ENV_VAR}``. Errors name the file,
the key (:func:`dotted`) and the cause, and show catalog and Spark values redacted.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, cast

import yaml
from pydantic import ValidationError

from icelake_assets.settings.redaction import (
    ENV_REF,
    literal_secrets,
    redact_value,
    remember_secrets,
    settings_secrets,
)
from icelake_assets.settings.schema import MetricsSettings, Settings, SettingsError

CONFIG_ENV_VAR = "ICELAKE_CONFIG"
DEFAULT_CONFIG_FILE = "icelake.yaml"


def _resolve_paths(props: dict[str, Any], base: Path) -> dict[str, Any]:
    """Make relative SQLite and warehouse paths absolute against the settings folder (nested
    properties such as ``auth`` stay mappings)."""
    out: dict[str, Any] = {k: v if isinstance(v, Mapping) else str(v) for k, v in props.items()}
    uri = str(out.get("uri", ""))
    if uri.startswith("sqlite:///") and not uri.startswith("sqlite:////"):
        out["uri"] = "sqlite:///" + str((base / uri[len("sqlite:///") :]).resolve())
    wh = out.get("warehouse")
    if isinstance(wh, str) and wh and "://" not in wh and not wh.startswith("file:"):
        out["warehouse"] = (base / wh).resolve().as_uri()
    return out


def default_settings(base: Path | None = None) -> Settings:
    """The embedded demo lake: a SQLite SQL catalog and a local warehouse under ``<base>/.lake``."""
    base = (base or Path.cwd()).resolve()
    lake = base / ".lake"
    return Settings(
        catalogs={
            "demo": {
                "type": "sql",
                "uri": f"sqlite:///{lake / 'catalog.db'}",
                "warehouse": (lake / "warehouse").as_uri(),
            }
        },
        metrics=MetricsSettings(textfile_dir=str(lake / "metrics")),
    )


def dotted(path: tuple[Any, ...] | list[Any]) -> str:
    """A key path as written in messages: ``policies.namespaces['taxi'].snapshots.min_keep``."""
    out = ""
    for part in path:
        text = str(part)
        if isinstance(part, int) or "." in text or not text.replace("_", "").replace("-", "").isalnum():
            out += f"[{part!r}]"
        else:
            out += ("." if out else "") + text
    return out


def pyiceberg_env_var(catalog: str, key: str) -> str:
    """The variable pyiceberg reads for ``catalog.<catalog>.<key>`` (``.`` → ``__``, ``-`` → ``_``)."""
    return f"PYICEBERG_CATALOG__{catalog.upper()}__{key.upper().replace('.', '__').replace('-', '_')}"


def _refuse_literal_secrets(data: Mapping[str, Any], source: str) -> None:
    """A literal secret is refused, never echoed: the message names its key (and pyiceberg's variable)."""
    found = literal_secrets(data)
    if found:
        lines = [f"invalid settings in {source}:"]
        for path in found:
            env = pyiceberg_env_var(str(path[1]), str(path[2])) if path[0] == "catalogs" else ""
            alt = f" (or set {env}, as pyiceberg reads it)" if env else ""
            lines.append(
                f"  {dotted(path)}: a literal secret is refused (a key not known to be safe, or a URI "
                f"password or query value): write ${{ENV_VAR}} and export the variable{alt}"
            )
        raise SettingsError("\n".join(lines))


def _interpolate(value: Any, path: tuple[Any, ...], source: str) -> Any:
    """Replace ``${VAR}`` / ``${VAR:-default}`` in every string of the file by the environment's value."""
    if isinstance(value, dict):
        return {k: _interpolate(v, (*path, k), source) for k, v in value.items()}
    if isinstance(value, list):
        return [_interpolate(v, (*path, i), source) for i, v in enumerate(value)]
    if not isinstance(value, str) or "${" not in value:
        return value

    def sub(match: re.Match[str]) -> str:
        name, default = match.group(1), match.group(2)
        if name in os.environ:
            return os.environ[name]
        if default is not None:
            return default
        raise SettingsError(
            f"invalid settings in {source}:\n  {dotted(path)}: environment variable {name} is not set "
            f"(referenced as ${{{name}}})"
        )

    return ENV_REF.sub(sub, value)


def _text_leaves(value: Any) -> Any:
    return {str(k): _text_leaves(v) for k, v in value.items()} if isinstance(value, Mapping) else str(value)


def pyiceberg_catalogs() -> dict[str, Any]:
    """Catalogs exactly as pyiceberg configures them: the first ``.pyiceberg.yaml`` of $PYICEBERG_HOME,
    ~ or the working folder, merged with ``PYICEBERG_CATALOG__<NAME>__<KEY>`` variables (read now,
    not at pyiceberg's import, so a changed environment is seen)."""
    from pyiceberg.utils.config import Config

    where = ".pyiceberg.yaml / PYICEBERG_* environment variables"
    try:
        config = Config().config
    except ValueError as err:  # its message may end with a value: keep only the cause
        raise SettingsError(
            f"pyiceberg configuration ({where}) is invalid: {str(err).split(', value:')[0]}"
        ) from None
    catalogs = config.get("catalog") or {}
    if not isinstance(catalogs, Mapping):
        raise SettingsError(f"pyiceberg configuration ({where}): 'catalog' must be a mapping of catalogs")
    out: dict[str, Any] = {}
    for name, props in catalogs.items():
        if not isinstance(props, Mapping):
            raise SettingsError(
                f"pyiceberg configuration ({where}): catalog.{name} must be a mapping of properties"
            )
        # Nested properties (auth, ssl) stay mappings, as pyiceberg's load_catalog takes them.
        out[str(name)] = {str(k): _text_leaves(v) for k, v in props.items()}
    return out


def _format_validation_error(source: str, err: ValidationError) -> str:
    lines = [f"invalid settings in {source}:"]
    for e in err.errors():
        loc = tuple(e["loc"])
        key = dotted(loc) or "<root>"
        msg = e["msg"]
        if e["type"] == "extra_forbidden":
            msg = "unknown key"
        if not loc:  # a whole-file rule: the message names its key, the input is the whole file
            lines.append(f"  {msg.removeprefix('Value error, ')}")
            continue
        # Catalog and Spark values may be secrets; policy values are shown as written.
        shown = e.get("input")
        if loc[0] in ("catalogs", "spark"):
            shown = redact_value(str(loc[-1]), shown)
        lines.append(f"  {key}: {msg} (got {shown!r})")
    return "\n".join(lines)


def parse_settings(data: Any, source: str, base: Path) -> Settings:
    """Validate a parsed settings document; ``source`` names it in errors, ``base`` anchors relative paths."""
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise SettingsError(
            f"invalid settings in {source}: the top level must be a mapping, got {type(data).__name__}"
        )
    data = dict(data)
    _refuse_literal_secrets(data, source)
    data = _interpolate(data, (), source)
    from pyiceberg.typedef import RecursiveDict
    from pyiceberg.utils.config import merge_config

    pyiceberg = pyiceberg_catalogs()
    if "catalogs" not in data:
        # An existing pyiceberg user changes nothing: its catalogs are the lake; else the demo lake.
        data["catalogs"] = pyiceberg or default_settings(base).catalogs
    elif isinstance(data["catalogs"], dict):
        catalogs = {}
        for name, props in data["catalogs"].items():
            if props is None:
                props = {}  # `name:` alone takes the catalog from pyiceberg's configuration
            if not isinstance(props, dict):
                raise SettingsError(
                    f"invalid settings in {source}:\n  catalogs.{name}: must be a mapping of properties"
                )
            # The file wins over pyiceberg's configuration, as properties passed to load_catalog do.
            catalogs[name] = merge_config(
                cast(RecursiveDict, pyiceberg.get(str(name).lower(), {})),
                cast(RecursiveDict, _resolve_paths(props, base)),
            )
        data["catalogs"] = catalogs
    metrics = data.get("metrics", {})
    if isinstance(metrics, dict):  # anything else: the model reports it
        folder = metrics.get("textfile_dir", MetricsSettings().textfile_dir)
        data["metrics"] = {**metrics, "textfile_dir": str((base / str(folder)).resolve())}
    data["source"] = source
    # Errors raised later (a driver's, Spark's) may echo these values: causes.py hides them (redaction.py).
    remember_secrets(settings_secrets(data))
    try:
        return Settings.model_validate(data)
    except ValidationError as err:
        raise SettingsError(_format_validation_error(source, err)) from None


def load_settings(path: str | os.PathLike[str] | None = None) -> Settings:
    """Load settings from ``path``, else ``$ICELAKE_CONFIG``, else ``./icelake.yaml``, else the default
    (pyiceberg's configured catalogs if any, else the embedded demo lake)."""
    explicit = path or os.environ.get(CONFIG_ENV_VAR)
    candidate = Path(explicit) if explicit else Path.cwd() / DEFAULT_CONFIG_FILE
    if not candidate.exists():
        if explicit:
            raise SettingsError(
                f"settings file {candidate} does not exist (from {'argument' if path else CONFIG_ENV_VAR})"
            )
        if pyiceberg_catalogs():
            return parse_settings({}, "<pyiceberg configuration>", Path.cwd())
        return default_settings()
    try:
        data = yaml.safe_load(candidate.read_text())
    except yaml.YAMLError as err:
        raise SettingsError(f"settings file {candidate} is not valid YAML: {err}") from None
    return parse_settings(data, str(candidate), candidate.resolve().parent)
