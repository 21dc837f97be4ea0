"""Asset checks and the lake overview: a finding per concern as a check result, the checks of a table
group in one op, the table_configuration and catalogs_reachable checks, one health truth per table,
the overview's sums and the tables waiting for an approval."""
