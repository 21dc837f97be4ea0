"""The maintenance sensor's cursor, in a form people can read on the sensor's page and the sensor
can parse back.

One line per table, fields separated by tabs (the UI shows the cursor in one monospace line, where a
tab or a line break reads as a space), after a head line that says where the next tick starts and
what the tables' outcomes were::

    icelake/v2	next table #1	3 tables: 1 deferred, 1 launched, 1 skipped
    demo.taxi.trips	launched	00012-3f2a.metadata.json	scanned 2026-11-24T18:00:00Z	-
    demo.sales.orders	deferred	00004-9b1c.metadata.json	scanned 2026-11-24T18:00:00Z	since 2026-11-24T17:55:00Z

The head's counts are for people (the parser reads only where the next tick starts). The fields:
the table, its last outcome, the metadata file the sensor last saw (``-``: none), when its orphans
were last listed and since when it has wanted maintenance (``-``: it does not). Times are UTC to the
millisecond (the fraction left out when zero). The JSON cursor of earlier versions (``{"offset": ..,
"seen": {..}}``) is still read, so a running sensor keeps its state across an upgrade; an unreadable
cursor only costs one evaluation of every table.
"""

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from icelake_assets.planning.history import Seen
from icelake_assets.planning.outcome import Outcome

HEAD = "icelake/v2"
_NONE = "-"
_SCANNED, _SINCE = "scanned ", "since "


def _time(value: Any) -> str:
    """UTC to the millisecond, the fraction left out when it is zero. Milliseconds because the launch
    order puts the older of two equal findings first: two ticks less than a second apart must not
    write the same time for findings they saw in that order."""
    if value is None:
        return _NONE
    moment = datetime.fromtimestamp(round(float(value), 3), tz=UTC)
    return moment.isoformat(timespec="milliseconds" if moment.microsecond else "seconds").replace(
        "+00:00", "Z"
    )


def _parse_time(text: str, prefix: str) -> float | None:
    if text == _NONE:
        return None
    return datetime.fromisoformat(text.removeprefix(prefix)).timestamp()


def _name(table: str) -> str:
    """A table name as one field: quoted (JSON) only when it holds a tab, a line break or a quote."""
    return json.dumps(table, ensure_ascii=False) if any(c in table for c in '\t\n\r"') else table


def _parse_name(text: str) -> str:
    return str(json.loads(text)) if text.startswith('"') else text


def _from_list(entry: list[Any]) -> Seen:
    """A table of the JSON cursor: ``[metadata file, outcome, last orphan scan, since]`` (the first
    versions wrote only the first two or three)."""
    scanned = entry[2] if len(entry) > 2 else None
    since = entry[3] if len(entry) > 3 else None
    return Seen(
        str(entry[0] or ""),
        Outcome(entry[1]),
        None if scanned is None else float(scanned),
        None if since is None else float(since),
    )


@dataclass
class TickCursor:
    """Where the last tick stopped, and per table the metadata file it saw and what it decided."""

    offset: int = 0
    seen: dict[str, Seen] = field(default_factory=dict)  # by table name

    @classmethod
    def loads(cls, text: str | None) -> "TickCursor":
        if not text:
            return cls()
        try:
            if text.lstrip().startswith("{"):  # the JSON cursor of earlier versions
                data = json.loads(text)
                return cls(
                    int(data.get("offset", 0)), {k: _from_list(v) for k, v in data.get("seen", {}).items()}
                )
            return cls._parse(text)
        except (ValueError, TypeError, AttributeError, IndexError, KeyError):
            return cls()  # an unreadable cursor only costs one full evaluation

    @classmethod
    def _parse(cls, text: str) -> "TickCursor":
        head, *lines = text.split("\n")
        fields = head.split("\t")
        if fields[0] != HEAD:
            raise ValueError(f"not an icelake cursor: {head[:40]!r}")
        offset = int(fields[1].rsplit("#", 1)[1]) - 1
        seen: dict[str, Seen] = {}
        for line in lines:
            if not line:
                continue
            name, outcome, metadata_file, scanned, since = line.split("\t")
            seen[_parse_name(name)] = Seen(
                "" if metadata_file == _NONE else _parse_name(metadata_file),
                Outcome(outcome),
                _parse_time(scanned, _SCANNED),
                _parse_time(since, _SINCE),
            )
        return cls(offset, seen)

    def dumps(self) -> str:
        counts: dict[str, int] = {}
        for entry in self.seen.values():
            counts[str(entry.outcome)] = counts.get(str(entry.outcome), 0) + 1
        outcomes = ", ".join(f"{n} {o}" for o, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))
        lines = [
            f"{HEAD}\tnext table #{self.offset + 1}\t{len(self.seen)} tables: {outcomes or 'none seen yet'}"
        ]
        for table, entry in self.seen.items():
            lines.append(
                "\t".join(
                    (
                        _name(table),
                        str(entry.outcome),
                        _name(entry.metadata_file) if entry.metadata_file else _NONE,
                        _NONE if entry.scanned_at is None else _SCANNED + _time(entry.scanned_at),
                        _NONE if entry.since is None else _SINCE + _time(entry.since),
                    )
                )
            )
        return "\n".join(lines)
