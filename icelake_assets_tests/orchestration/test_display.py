"""Human units for people reading the UI."""

from icelake_assets.orchestration.display import human_bytes, human_duration, md_cell, readable


def test_sizes_read_in_decimal_units():
    assert human_bytes(0) == "0 bytes"
    assert human_bytes(732_552) == "732.6 kB"
    assert human_bytes(16_118_266) == "16.1 MB"
    assert human_bytes(3 * 10**9) == "3.0 GB"


def test_durations_read_like_the_uis_run_durations():
    assert human_duration(0.006) == "6.0ms"
    assert human_duration(8.729) == "8.73s"
    assert human_duration(125.3) == "2m5s"
    assert human_duration(3725) == "1h2m"


def test_byte_counts_in_a_sentence_read_in_human_units():
    reason = "6 partitions with > 20 files averaging < 134217728 bytes (180 files, 999 bytes)"
    assert readable(reason) == "6 partitions with > 20 files averaging < 134.2 MB (180 files, 999 bytes)"
    assert md_cell("rewriting 10737418240 bytes is over the cap") == "rewriting 10.7 GB is over the cap"


def test_a_markdown_cell_escapes_pipes_joins_lines_and_is_cut():
    assert md_cell("a | b\nc") == "a \\| b c"
    assert md_cell("x" * 100, limit=10) == "x" * 9 + "…"
