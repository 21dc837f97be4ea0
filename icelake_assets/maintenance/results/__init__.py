"""What an op did to a table, typed: one frozen result per op and the plain-JSON form the run state,
the audit and the materialization metadata carry."""
