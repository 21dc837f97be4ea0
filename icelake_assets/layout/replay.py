"""Replay a table's recorded filters against candidate layouts of a sample of its rows, and predict
for each candidate the share of files a query reads (metadata and a bounded sample only, no engine).

For each candidate (layout/candidates.py) the sample is laid out as the candidate would write it, in
files of the table's target size scaled to the sample (rows per file = sample rows × target bytes /
table bytes, at least 1); for each recorded query shape, probes of that shape (layout/probes.py: the
literals are sanitized, so values come from the sample) are judged file by file with Iceberg's
inclusive-metrics rules, as scan planning judges real files. A shape's prediction is the mean share
of files its probes read; the table's is the mean over shapes weighted as the reports weigh them
(how often each ran times the bytes it read). Unfiltered scans (``true``) read every file under any
layout and are left out; so are shapes past the ``max_shapes`` heaviest (bounded cost)."""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa
from pyiceberg.expressions import AlwaysTrue, BooleanExpression
from pyiceberg.io.pyarrow import ArrowScan
from pyiceberg.partitioning import PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table import Table

from icelake_assets import private_api
from icelake_assets.layout.candidates import Candidate, LaidOut, candidates, lay_out, partition_ids
from icelake_assets.layout.filters import Always, predicates
from icelake_assets.layout.mining import TableUsage
from icelake_assets.layout.probes import ProbeMaker

PROBES_PER_SHAPE = 32
MAX_SHAPES = 16
# A sample cut into more files than this is cut into this many (bounds the evaluation's cost; the
# candidates are still compared on one cut).
MAX_SAMPLE_FILES = 2_000


@dataclass(frozen=True)
class ShapePrediction:
    key: str
    text: str
    weight: float
    scans: int
    fraction_read: float  # mean share of the sample's files the shape's probes read
    measured_skipped_ratio: float  # what its reports measured on the table as it is


@dataclass(frozen=True)
class CandidatePrediction:
    candidate: Candidate
    sample_files: int
    fraction_read: float  # weighted over the shapes
    table_files: int  # the table's files at its target size
    table_bytes: int
    shapes: tuple[ShapePrediction, ...]

    @property
    def skipped_fraction(self) -> float:
        return 1 - self.fraction_read

    @property
    def files_read(self) -> float:
        """Predicted files read per query (weighted), on the table rewritten at its target size."""
        return self.fraction_read * self.table_files

    @property
    def bytes_skipped(self) -> float:
        """Predicted bytes a query does not read (weighted), on the table as a whole."""
        return self.skipped_fraction * self.table_bytes


@dataclass(frozen=True)
class Calibration:
    """The current layout's predicted skipped share against the one its reports measured (same
    shapes, same weights). Off when the table's files are far from its target size (the replay
    predicts the table rewritten at its target) or the data changed since the reports."""

    predicted_skipped: float
    measured_skipped: float

    @property
    def error(self) -> float:
        return self.predicted_skipped - self.measured_skipped


@dataclass(frozen=True)
class Replay:
    table_name: str
    sample_rows: int
    rows_per_file: int
    shapes_replayed: int
    probes_per_shape: int
    predictions: tuple[CandidatePrediction, ...]  # the current layout first
    calibration: Calibration | None

    @property
    def current(self) -> CandidatePrediction | None:
        return self.predictions[0] if self.predictions else None

    @property
    def best(self) -> CandidatePrediction | None:
        """The candidate reading the least (ties: the earlier, so the current layout and then the
        fewest keys win)."""
        return min(self.predictions, key=lambda p: p.fraction_read) if self.predictions else None


def files_read(laid_out: LaidOut, schema: Schema, expression: BooleanExpression) -> int:
    """The files of a laid-out sample a scan with ``expression`` would plan (inclusive metrics)."""
    evaluator = private_api.InclusiveMetricsEvaluator(schema, expression)
    return sum(1 for f in laid_out.files if evaluator.eval(f))


def rows_per_file(sample_rows: int, target_bytes: int, table_bytes: int) -> int:
    """The target size scaled to the sample, bounded so the sample holds at most MAX_SAMPLE_FILES."""
    scaled = round(sample_rows * target_bytes / table_bytes) if table_bytes > 0 else sample_rows
    return max(1, scaled, math.ceil(sample_rows / MAX_SAMPLE_FILES))


def replay(
    usage: TableUsage,
    sample: pa.Table,
    schema: Schema,
    spec: PartitionSpec,
    current: Candidate,
    target_bytes: int,
    table_bytes: int,
    probes: int = PROBES_PER_SHAPE,
    seed: int = 0,
    layouts: Sequence[Candidate] | None = None,
) -> Replay:
    """Predict each candidate layout's share of files read for ``usage``'s recorded filters."""
    shapes = [s for s in usage.shapes if not isinstance(s.filter, Always)][:MAX_SHAPES]
    per_file = rows_per_file(sample.num_rows, target_bytes, table_bytes)
    table_files = max(1, math.ceil(table_bytes / target_bytes)) if target_bytes > 0 else 1
    if not shapes or sample.num_rows == 0:
        return Replay(usage.table_name, sample.num_rows, per_file, 0, probes, (), None)
    layouts = tuple(layouts) if layouts is not None else candidates(usage, current, sample.column_names)
    parts = partition_ids(sample, schema, spec)
    laid = [lay_out(sample, schema, parts, c, per_file) for c in layouts]
    maker = ProbeMaker(sample, seed)
    fractions: list[list[float]] = [[] for _ in laid]  # [candidate][shape]
    for shape in shapes:
        read = [0.0] * len(laid)
        exprs = maker.probes(shape.filter, probes)
        for expr in exprs:
            try:
                evaluator = private_api.InclusiveMetricsEvaluator(schema, expr)
            except ValueError:  # a probe that does not bind (a type the sample cannot fit): reads all
                evaluator = private_api.InclusiveMetricsEvaluator(schema, AlwaysTrue())
            for i, layout in enumerate(laid):
                read[i] += sum(1 for f in layout.files if evaluator.eval(f)) / len(layout.files)
        for i in range(len(laid)):
            fractions[i].append(read[i] / len(exprs))
    weights = [s.weight for s in shapes]
    total = sum(weights) or 1.0
    predictions = tuple(
        CandidatePrediction(
            candidate=layout.candidate,
            sample_files=len(layout.files),
            fraction_read=sum(w * f for w, f in zip(weights, fractions[i], strict=True)) / total,
            table_files=table_files,
            table_bytes=table_bytes,
            shapes=tuple(
                ShapePrediction(s.key, s.text, s.weight, s.scans, f, s.skipped_ratio)
                for s, f in zip(shapes, fractions[i], strict=True)
            ),
        )
        for i, layout in enumerate(laid)
    )
    measured = [(s.weight, s.skipped_ratio) for s in shapes if s.files_considered]
    calibration = None
    if measured:
        weight = sum(w for w, _ in measured) or 1.0
        predicted = [
            (s.weight, 1 - f) for s, f in zip(shapes, fractions[0], strict=True) if s.files_considered
        ]
        calibration = Calibration(
            predicted_skipped=sum(w * r for w, r in predicted) / weight,
            measured_skipped=sum(w * r for w, r in measured) / weight,
        )
    return Replay(usage.table_name, sample.num_rows, per_file, len(shapes), probes, predictions, calibration)


def current_layout(table: Table) -> Candidate:
    """The table's sort order as a candidate (identity fields only: a transform's order is not the
    column's), or arrival order when it has none."""
    fields = [f for f in table.sort_order().fields if str(f.transform) == "identity"]
    names = tuple(table.schema().find_column_name(f.source_id) or "" for f in fields)
    return Candidate("current", names, tuple(f.direction.value == "desc" for f in fields))


def sample_columns(table: Table, usage: TableUsage) -> tuple[str, ...]:
    """What the replay reads: the filtered columns, the sort order's and the partition sources."""
    schema = table.schema()
    wanted = [p.column for s in usage.shapes for p in predicates(s.filter)]
    wanted += list(current_layout(table).keys)
    wanted += [schema.find_column_name(f.source_id) or "" for f in table.spec().fields]
    top = {f.name for f in schema.fields}
    return tuple(dict.fromkeys(c for c in wanted if c in top))


def read_sample(table: Table, columns: Sequence[str], rows: int, seed: int = 0) -> pa.Table:
    """At most ``rows`` rows of ``columns``, read from whole data files drawn at random (seeded) and
    kept in the order scan planning lists them, so a file's rows stay together as written."""
    tasks = list(table.scan().plan_files())
    shuffled = list(range(len(tasks)))
    random.Random(seed).shuffle(shuffled)
    picked, total = [], 0
    for i in shuffled:
        if total >= rows:
            break
        picked.append(i)
        total += tasks[i].file.record_count
    schema = table.schema().select(*columns) if columns else table.schema()
    scan = ArrowScan(table.metadata, table.io, schema, AlwaysTrue(), limit=rows)
    return scan.to_table([tasks[i] for i in sorted(picked)])


def replay_table(
    table: Table, usage: TableUsage, target_bytes: int, sample_rows: int, probes: int = PROBES_PER_SHAPE
) -> Replay:
    """:func:`replay` on a sample read from ``table`` (its bytes from the current snapshot's summary)."""
    if all(isinstance(s.filter, Always) for s in usage.shapes):  # nothing to replay: read nothing
        return Replay(usage.table_name, 0, 1, 0, probes, (), None)
    snapshot = table.current_snapshot()
    summary = snapshot.summary if snapshot and snapshot.summary else None
    table_bytes = int((summary.get("total-files-size") if summary else None) or 0)
    sample = read_sample(table, sample_columns(table, usage), sample_rows)
    return replay(
        usage, sample, table.schema(), table.spec(), current_layout(table), target_bytes, table_bytes, probes
    )
