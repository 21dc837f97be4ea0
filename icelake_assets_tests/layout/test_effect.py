"""The effect of a layout change from the scans after it (layout/effect.py): the same filter forms
compared across the change (literals left out), against the prediction."""

from __future__ import annotations

import pytest

from icelake_assets.layout.effect import filter_form, measure_effect
from icelake_assets.layout.reports import ScanReport


def eq(column: str, value: str) -> dict:
    # What Spark pushes for `WHERE column = ?`: the not-null it adds, and the equality.
    return {
        "type": "and",
        "left": {"type": "not-null", "term": column},
        "right": {"type": "eq", "term": column, "value": value},
    }


def scan(filter_doc, skipped: int, considered: int = 20) -> ScanReport:
    return ScanReport(
        "lake.ns.t", 1, filter_doc, 0, result_data_files=considered - skipped, skipped_data_files=skipped
    )


def test_the_same_form_with_other_values_is_compared_across_the_change():
    before = [scan(eq("vendor", f"(hash-{i:08x})"), 0) for i in range(5)]
    after = [scan(eq("vendor", f"(hash-{i + 9:08x})"), 18) for i in range(3)]
    effect = measure_effect(before, after, predicted_skipped=0.85)
    assert filter_form(before[0]) == filter_form(after[0]) == "vendor eq and vendor not-null"
    [form] = effect.forms
    assert (form.scans_before, form.scans_after) == (5, 3)
    assert effect.skipped_before == 0 and effect.skipped_after == pytest.approx(0.9)
    assert effect.helped and effect.prediction_held
    assert "predicted 85%: the prediction held" in effect.verdict


def test_a_prediction_off_by_more_than_the_tolerance_did_not_hold():
    effect = measure_effect([scan(eq("id", "(2-digit-int)"), 2)], [scan(eq("id", "(2-digit-int)"), 10)], 0.9)
    assert effect.helped and effect.skipped_after == pytest.approx(0.5)
    assert effect.prediction_held is False and "did not hold" in effect.verdict


def test_a_change_that_skipped_nothing_more_did_not_help():
    effect = measure_effect([scan(eq("id", "(1-digit-int)"), 4)], [scan(eq("id", "(1-digit-int)"), 4)], 0.8)
    assert effect.helped is False and effect.verdict.endswith("the change did not help")


def test_only_forms_seen_on_both_sides_count_and_unfiltered_scans_never():
    before = [scan(eq("id", "(1-digit-int)"), 0), scan(True, 0)]
    after = [scan(eq("vendor", "(hash-00000001)"), 19), scan(True, 0)]
    effect = measure_effect(before, after, 0.9)
    assert not effect.measured and effect.helped is None and effect.prediction_held is None
    assert effect.verdict.startswith("not measured")
