"""Layout from real queries (issue 52): Iceberg scan reports collected, mined per table, candidate
sort keys replayed on a sample, the chosen key applied through the maintenance loop."""
