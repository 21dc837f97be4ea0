"""The rows an expire_data commit removed, read from its own snapshot summary (issue 50): a deletion
vector (v3) or a file-scoped position delete file (v2) that merges an older one counts the older
positions again in ``added-position-deletes`` and reports them in ``removed-position-deletes``."""

from icelake_assets.maintenance.results.expire_data import ExpireDataResult, ExpiryCommit, rows_removed


def test_a_merged_deletion_vector_counts_only_the_rows_it_newly_deletes():
    # 40 rows deleted before; this commit deletes 25 more: its new vector holds all 65 positions.
    merged = {"added-position-deletes": "65", "removed-position-deletes": "40", "added-delete-files": "1"}
    assert rows_removed(merged) == 25  # was 65: "rows newer than the cut-off went", and a rollback


def test_copy_on_write_and_metadata_only_deletes_are_unchanged():
    assert rows_removed({"deleted-records": "100", "added-records": "60"}) == 40
    assert rows_removed({"deleted-records": "100"}) == 100
    assert rows_removed({"added-position-deletes": "7"}) == 7


def test_validation_matches_the_rows_past_the_cut_off_on_a_merged_vector():
    commit = ExpiryCommit.of(1, "delete", {"added-position-deletes": "65", "removed-position-deletes": "40"})
    result = ExpireDataResult(
        acted=True, reason="r", cutoff="c", commits=(commit,), matched_before=25, matched_after=0
    )
    assert result.expiry_mismatch() is None
