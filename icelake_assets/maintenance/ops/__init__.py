"""The maintenance ops: what each does to a table in one attempt (decided again on the table as it is
when the op starts), their descriptors in chain order, and the folding of a retried op's attempts."""
