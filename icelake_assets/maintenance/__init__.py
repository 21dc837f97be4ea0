"""Maintenance: the work a run does on a table, in four rooms layered downward (setup.cfg's
``maintenance-rooms`` contract), each above the next:

* ``verify/``: what is checked after a run (post-run, validation, cross-engine, scan probe), judging
  each op's effect through its descriptor;
* ``ops/``: the maintenance ops, one descriptor each (``ops/chain.py``): work, effect check, result;
* ``spark/``: Spark and Iceberg's procedures and actions (session, resident driver, fencing, commit tags);
* ``results/``: what an op did, as typed results and their JSON form.
"""
