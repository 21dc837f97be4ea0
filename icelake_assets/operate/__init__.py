"""Operator commands (`icelake plan`, `audit`, `approve`): decisions and records as typed results,
printed or turned into documented JSON at the edge (cli.py)."""
