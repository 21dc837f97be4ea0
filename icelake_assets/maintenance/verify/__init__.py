"""After a run: what changed (post-run), whether every row is still there (validation, and a second
engine reading the result), whether each op did what it was run for (effect), and the scan probe."""
