"""What a fleet measurement's sensor did (bench/loop/fleet_bench.py), read from its Dagster instance:
where its runs spent their time (queued, launch, ops), every sensor tick, and the timeline of runs
and ticks with the run slots left idle."""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from pathlib import Path

from dagster import DagsterEventType, DagsterInstance, RunsFilter

from icelake_assets.orchestration.sensors.maintenance import MAINTENANCE_SENSOR


@dataclass(frozen=True)
class Phases:
    """Where a sensor measurement's runs spent their time (means per run, seconds)."""

    queued: float  # created by the sensor -> dequeued (waiting for a run slot or its pool)
    launch: float  # dequeued -> first op (run worker process, imports, definitions, plan)
    ops: float  # first op -> run end
    by_op: dict[str, float]  # op -> mean seconds per run

    def row(self) -> str:
        ops = ", ".join(f"{op} {s:.1f}" for op, s in sorted(self.by_op.items(), key=lambda kv: -kv[1]))
        return f"queued {self.queued:.1f}, launch {self.launch:.1f}, ops {self.ops:.1f} ({ops})"


def _first(events: list, kind: DagsterEventType) -> float | None:
    return min((e.timestamp for e in events if e.dagster_event_type == kind), default=None)


def run_phases(home: Path) -> Phases:
    instance = DagsterInstance.from_config(str(home))
    records = instance.get_run_records(RunsFilter(tags={"dagster/sensor_name": MAINTENANCE_SENSOR}))
    spans: dict[str, list[float]] = {"queued": [], "launch": [], "ops": []}
    by_op: dict[str, float] = {}
    for record in records:
        events = [e for e in instance.all_logs(record.dagster_run.run_id) if e.dagster_event]
        dequeued = _first(events, DagsterEventType.PIPELINE_STARTING)
        first_op = _first(events, DagsterEventType.STEP_START)
        if dequeued is None or first_op is None or record.end_time is None:
            continue
        spans["queued"].append(dequeued - record.create_timestamp.timestamp())
        spans["launch"].append(first_op - dequeued)
        spans["ops"].append(record.end_time - first_op)
        started: dict[str, float] = {}
        for e in events:
            step = e.dagster_event.step_key if e.dagster_event else None
            if step is None:
                continue
            if e.dagster_event_type == DagsterEventType.STEP_START:
                started[step] = e.timestamp
            elif e.dagster_event_type in (DagsterEventType.STEP_SUCCESS, DagsterEventType.STEP_FAILURE):
                op = step.rsplit(".", 1)[-1].rsplit("__", 1)[-1]
                by_op[op] = by_op.get(op, 0.0) + e.timestamp - started.get(step, e.timestamp)
    runs = max(1, len(spans["ops"]))
    mean = lambda xs: statistics.fmean(xs) if xs else float("nan")  # noqa: E731
    return Phases(
        mean(spans["queued"]),
        mean(spans["launch"]),
        mean(spans["ops"]),
        {k: v / runs for k, v in by_op.items()},
    )


def sensor_ticks(home: Path) -> list[tuple[str, float, float, int]]:
    """Every sensor tick of the instance at ``home``: sensor, start, end (epoch seconds), runs requested."""
    instance = DagsterInstance.from_config(str(home))
    ticks = []
    for state in instance.all_instigator_state():
        if state.instigator_type.value != "SENSOR":
            continue
        for tick in instance.get_ticks(state.instigator_origin_id, state.selector_id):
            end = tick.tick_data.end_timestamp or tick.timestamp
            ticks.append((state.instigator_name, tick.timestamp, end, len(tick.run_ids)))
    return sorted(ticks, key=lambda t: t[1])


def print_timeline(result: dict, cap: int) -> None:
    """The runs (queued, started, ended, tables) and the sensors' ticks, in seconds from the start,
    and the run slots left idle between the first start and the last end (``cap`` slots)."""
    wall_start = result["wall_start"]
    print("runs (s from the start): queued started ended tables")
    for queued, started, ended, tables, _ in result["timeline"]:
        print(f"  {queued:7.1f} {started:7.1f} {ended:7.1f} {len(tables.split(','))}")
    spans = [(t[1], t[2]) for t in result["timeline"] if t[1] > 0 and t[2] > 0]
    first, last = min(s for s, _ in spans), max(e for _, e in spans)
    busy = sum(e - s for s, e in spans)
    print(f"slot-seconds idle from the first start to the last end: {cap * (last - first) - busy:.1f}")
    print("sensor ticks (s from the start): sensor start duration runs")
    for name, start, end, runs in result["ticks"]:
        print(f"  {name:32s} {start - wall_start:7.1f} {end - start:6.1f} {runs}")
