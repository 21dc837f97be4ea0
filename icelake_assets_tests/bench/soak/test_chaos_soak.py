"""The chaos soak's pure parts (bench/soak/chaos_soak.py): its ledgers say exactly which ids must be in a
table, may be, and must not be, and its fault plan is the seed's. No server, no Spark: seconds."""

import json
import random

from bench.soak.checks import check_ids
from bench.soak.faults import KINDS, plan_faults
from bench.soak.writers import Ledger, LedgerState, outcome_of, parse_ledger, read_ledger


def _lines(*entries: dict) -> list[str]:
    return [json.dumps(e) for e in entries]


def test_an_outcome_only_counts_once_the_commit_returned_and_a_try_without_one_is_unknown():
    state = parse_ledger(
        _lines(
            {"n": 1, "op": "append", "state": "try", "ids": [1, 2]},
            {"n": 1, "state": "ok", "ids": [1, 2]},
            {"n": 2, "op": "append", "state": "try", "ids": [3, 4]},
            {"n": 2, "state": "fail", "ids": []},
            {"n": 3, "op": "append", "state": "try", "ids": [5]},
            {"n": 3, "state": "unknown", "ids": []},
            {"n": 4, "op": "delete", "state": "try", "ids": [1]},
            {"n": 4, "state": "ok", "ids": [1]},
            {"n": 5, "op": "delete", "state": "try", "ids": [2]},  # the writer died here
            {"n": 6, "op": "append", "state": "try", "ids": [6]},
        )
        + ['{"n": 6, "state": "o']  # torn by a kill -9 mid-write
    )
    assert state.appended == {1, 2} and state.deleted == {1}
    assert state.failed_appends == {3, 4}
    assert state.maybe_appended == {5, 6} and state.maybe_deleted == {2}
    assert state.torn_lines == 1
    assert state.actions[("append", "unknown")] == 2 and state.actions[("delete", "ok")] == 1


def test_the_writer_side_round_trips(tmp_path):
    path = tmp_path / "w.jsonl"
    ledger = Ledger(path)
    n = ledger.attempt("append", [7, 8])
    ledger.outcome(n, "ok", [7, 8])
    ledger.attempt("append", [9])
    state = read_ledger(path)
    assert state.appended == {7, 8} and state.maybe_appended == {9}
    assert read_ledger(tmp_path / "missing.jsonl") == LedgerState()


def test_check_ids_names_lost_duplicated_resurrected_and_phantom_ids_and_lets_unknown_ones_be():
    state = LedgerState(
        appended=frozenset({1, 2, 3, 4, 5}),
        deleted=frozenset({4}),
        maybe_appended=frozenset({10, 11}),
        maybe_deleted=frozenset({5}),
        failed_appends=frozenset({20}),
    )
    clean = check_ids("t", "pyiceberg", state, {1: 1, 2: 1, 3: 1, 10: 1})
    assert clean.ok and clean.expected == 3 and (clean.unknown_present, clean.unknown_absent) == (1, 2)
    bad = check_ids("t", "duckdb", state, {1: 2, 3: 1, 4: 1, 20: 1, 99: 1})
    assert not bad.ok
    assert (bad.lost, bad.duplicated, bad.resurrected, bad.phantom) == ((2,), (1,), (4,), (20, 99))
    assert "1 lost (e.g. 2)" in bad.describe()


def test_merged_ledgers_of_one_table_add_up():
    a = LedgerState(appended=frozenset({1, 2}))
    b = LedgerState(deleted=frozenset({2}), torn_lines=1)
    merged = a.merged(b)
    assert merged.appended == {1, 2} and merged.deleted == {2} and merged.torn_lines == 1


def test_only_a_conflict_or_a_validation_is_a_sure_failure():
    class CommitFailedException(Exception):
        pass

    assert outcome_of(CommitFailedException("conflict")) == "fail"
    assert outcome_of(ConnectionError("refused")) == "unknown"
    spark = "An error occurred while calling o42.sql.\n: org.apache.iceberg.exceptions.ValidationException: x"
    assert outcome_of(RuntimeError(spark)) == "fail"
    unknown = "An error occurred while calling o42.sql.\n: org.apache.iceberg.exceptions.CommitStateUnknownException"
    assert outcome_of(RuntimeError(unknown)) == "unknown"


def test_the_fault_plan_is_the_seeds_and_hits_every_kind():
    plan = plan_faults(random.Random(7), 180)
    assert plan == plan_faults(random.Random(7), 180)
    assert sorted(f.kind for f in plan) == sorted(KINDS)
    assert all(15 <= f.at <= 165 for f in plan) and [f.at for f in plan] == sorted(f.at for f in plan)
    long = plan_faults(random.Random(7), 1800)
    assert len(long) == 30 and {k: sum(f.kind == k for f in long) for k in KINDS}.keys() == set(KINDS)


def test_the_soak_s_modules_import_together():
    """``make soak`` is not run by ``make test``: a name one of its modules no longer exports would
    show only there (a refactor of soak_stack.py once dropped the Reaper the soak starts)."""
    import bench.soak.chaos_soak as soak

    assert callable(soak.main) and soak.Reaper is not None


def test_the_report_says_failed_only_of_an_assertion_that_failed(capsys):
    from bench.soak.checks import Outcome
    from bench.soak.report import Verdict, report

    healed = Outcome("health: healed in time", True, ("every table Healthy 246 s after the last fault",))
    lost = Outcome("rows: ledgers", False, ("t: 1 id lost",))
    assert report([], [], [], [], Verdict((healed,))) is True
    out = capsys.readouterr().out
    assert "ok health: healed in time: every table Healthy 246 s" in out and "FAILED" not in out
    assert report([], [], [], [], Verdict((healed, lost))) is False
    assert "FAILED rows: ledgers: t: 1 id lost" in capsys.readouterr().out
