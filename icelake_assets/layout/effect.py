"""Whether a layout change helped, measured by the scans that came after it (issue 52, item 5).

The same filters are compared before and after: reports are grouped by *form* (the filtered columns
and operators, literals left out: Iceberg sanitizes them, and a dashboard asking for a new vendor
each time is still the same query), and only forms seen on both sides count, so a new kind of query
after the change cannot pass for a gain. The measured share of data files skipped after the change
is set against the replay's prediction: held when within ``tolerance`` of it (relative)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from icelake_assets.layout.filters import Always, FilterError, parse_filter, predicates
from icelake_assets.layout.reports import ScanReport

DEFAULT_TOLERANCE = 0.2  # issue 52: the prediction within 20 % of what the next scans measure
MIN_GAIN = 0.05  # skipped share gained below which a change "did not help"


def filter_form(report: ScanReport) -> str | None:
    """``column op`` pairs of the report's filter, sorted (``None``: unfiltered or unreadable)."""
    try:
        node = parse_filter(report.filter)
    except FilterError:
        return None
    if isinstance(node, Always):
        return None
    pairs = sorted({f"{p.column} {p.op}" for p in predicates(node)})
    return " and ".join(pairs) or None


@dataclass(frozen=True)
class FormEffect:
    """One filter form's scans and skipped share of data files, before and after."""

    form: str
    scans_before: int
    scans_after: int
    skipped_before: float
    skipped_after: float


@dataclass(frozen=True)
class LayoutEffect:
    """The measured effect of a change on the forms seen on both sides of it (weighted by the files
    their scans considered), against the prediction."""

    forms: tuple[FormEffect, ...]
    skipped_before: float | None
    skipped_after: float | None
    predicted_skipped: float | None
    tolerance: float

    @property
    def measured(self) -> bool:
        return self.skipped_after is not None

    @property
    def helped(self) -> bool | None:
        """More files skipped after than before (None: not measured yet)."""
        if self.skipped_after is None or self.skipped_before is None:
            return None
        return self.skipped_after - self.skipped_before >= MIN_GAIN

    @property
    def prediction_held(self) -> bool | None:
        if self.skipped_after is None or self.predicted_skipped is None:
            return None
        return abs(self.skipped_after - self.predicted_skipped) <= self.tolerance * max(
            self.predicted_skipped, 1e-9
        )

    @property
    def verdict(self) -> str:
        if not self.measured:
            return "not measured: no scan after the change repeats a filter seen before it"
        assert self.skipped_before is not None and self.skipped_after is not None
        text = f"skipped {self.skipped_before:.0%} of data files before, {self.skipped_after:.0%} after"
        if self.predicted_skipped is not None:
            held = "held" if self.prediction_held else "did not hold"
            text += f"; predicted {self.predicted_skipped:.0%}: the prediction {held}"
        return text + ("" if self.helped else "; the change did not help")


def _totals(reports: Iterable[ScanReport]) -> dict[str, tuple[int, int, int]]:
    """form -> (scans, skipped files, considered files)."""
    out: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    for r in reports:
        form = filter_form(r)
        if form is None or not r.considered_data_files:
            continue
        t = out[form]
        t[0] += 1
        t[1] += r.skipped_data_files
        t[2] += r.considered_data_files
    return {k: (v[0], v[1], v[2]) for k, v in out.items()}


def measure_effect(
    before: Iterable[ScanReport],
    after: Iterable[ScanReport],
    predicted_skipped: float | None = None,
    tolerance: float = DEFAULT_TOLERANCE,
) -> LayoutEffect:
    """The change's effect from the reports before and after it (the caller splits them at the
    change's time)."""
    b, a = _totals(before), _totals(after)
    common = sorted(set(b) & set(a))
    forms = tuple(FormEffect(f, b[f][0], a[f][0], b[f][1] / b[f][2], a[f][1] / a[f][2]) for f in common)
    if not common:
        return LayoutEffect((), None, None, predicted_skipped, tolerance)
    skipped_before = sum(b[f][1] for f in common) / sum(b[f][2] for f in common)
    skipped_after = sum(a[f][1] for f in common) / sum(a[f][2] for f in common)
    return LayoutEffect(forms, skipped_before, skipped_after, predicted_skipped, tolerance)
