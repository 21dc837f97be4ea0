"""Spark for maintenance: the session of a run (its own or the shared resident driver), Iceberg's
procedures and actions, the commit tags naming the run on each snapshot, the fence that stops a run
judged dead from committing, and the pre-flight of what Spark can reach."""
