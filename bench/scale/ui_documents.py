"""The GraphQL documents the Dagster UI sends, read from the installed webserver's bundle (issue 15).

The bundle (``dagster_webserver/webapp/build``) ships source maps whose ``sourcesContent`` holds the
UI's TypeScript: every ``gql`...``` template there is a query or fragments, with the fragments it
uses interpolated as ``${FRAGMENT}``. A document is a query plus, transitively, every fragment it
spreads, exactly what the UI's Apollo client posts: the bench times the installed version's queries,
not a hand-written approximation that could drift from them.
"""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path

import dagster_webserver

BUILD = Path(dagster_webserver.__file__).resolve().parent / "webapp" / "build"
_TEMPLATE = re.compile(r"gql`(.*?)`", re.S)
_INTERPOLATION = re.compile(r"\$\{[^}]*\}")
_DEFINITION = re.compile(r"\b(query|mutation|subscription|fragment)\s+([A-Za-z_]\w*)")
_SPREAD = re.compile(r"\.\.\.\s*([A-Za-z_]\w*)")


def _split(template: str) -> dict[str, str]:
    """Top-level definitions of one template, by name (a brace-matched block each)."""
    out: dict[str, str] = {}
    pos = 0
    while match := _DEFINITION.search(template, pos):
        start = template.find("{", match.end())
        if start < 0:  # not a definition (prose in a template): nothing more to read
            break
        depth, end = 0, start
        for end in range(start, len(template)):
            depth += {"{": 1, "}": -1}.get(template[end], 0)
            if depth == 0:
                break
        out[match.group(2)] = template[match.start() : end + 1]
        pos = end + 1
    return out


@cache
def definitions(build: Path = BUILD) -> dict[str, str]:
    """Every query and fragment of the UI's sources, by name."""
    maps = sorted(build.glob("_next/static/**/*.js.map"))
    if not maps:
        raise FileNotFoundError(f"no source maps under {build}: cannot read the UI's GraphQL documents")
    found: dict[str, str] = {}
    for path in maps:
        data = json.loads(path.read_text())
        for content in data.get("sourcesContent") or []:
            if content and "gql`" in content:
                for template in _TEMPLATE.findall(content):
                    found.update(_split(_INTERPOLATION.sub("", template)))
    return found


def document(operation: str, build: Path = BUILD) -> str:
    """``operation`` and every fragment it spreads (transitively), as one document."""
    defs = definitions(build)
    if operation not in defs:
        raise KeyError(f"the UI bundle under {build} has no GraphQL operation {operation!r}")
    wanted, queue = [operation], [operation]
    while queue:
        for name in _SPREAD.findall(defs[queue.pop()]):
            if name == "on" or name in wanted:
                continue
            if name not in defs:
                raise KeyError(f"{operation}: fragment {name!r} not found in the UI bundle")
            wanted.append(name)
            queue.append(name)
    return "\n".join(defs[name] for name in wanted)
