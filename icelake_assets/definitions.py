"""Dagster entry point (workspace.yaml, `dagster dev`): every selected table of the configured
catalogs, with its maintenance, checks and sensors. Settings: $ICELAKE_CONFIG or ./icelake.yaml.
Tables come from the cached inventory when it is fresh (catalog/inventory.py), else from discovery."""

from dagster import DagsterRun, Definitions, definitions

# Importing the demo registers its lineage assets (demo/__init__.py), for tables whose lineage names
# them: orchestration does not import the demo, the code location brings it.
import icelake_assets.demo  # noqa: F401
from icelake_assets.orchestration.project import INVENTORY_METADATA_KEY, RunSelection, load_definitions
from icelake_assets.private_api import DefinitionsLoadContext, DefinitionsLoadType, run_being_loaded

# Dagster 1.13's code server calls a @definitions function twice per load: to find the module's
# targets (initialization), then to build the repository (reconstruction, with no metadata), and does
# not keep the result: at 10,000 tables each build takes tens of seconds. A reconstruction without
# metadata, or with the metadata a build of this process recorded, is that build; a run worker (a new
# process, given the code server's metadata) builds once from the recorded inventory. A reload starts
# a new process. A run worker builds only the table groups its run selects (project.py).
_BUILT: dict[str, Definitions] = {}


def _recorded(defs: Definitions) -> str:
    value = (defs.metadata or {}).get(INVENTORY_METADATA_KEY)
    return repr(getattr(value, "data", value))


@definitions
def defs() -> Definitions:
    # Dagster sets the load context (code server: initialization; run worker: reconstruction).
    context = DefinitionsLoadContext.get()
    key = "initialization"
    run = None
    if context.load_type == DefinitionsLoadType.RECONSTRUCTION:
        recorded = context.reconstruction_metadata.get(INVENTORY_METADATA_KEY)
        # The code server's own second call carries no metadata: it is this process's first build.
        if recorded is not None or key not in _BUILT:
            key = repr(recorded)
        if recorded is not None:
            run = _selection(run_being_loaded())
            key = f"{key} run {run.run_id}" if run else key
    if key not in _BUILT:
        built = load_definitions(context, run)
        _BUILT[key] = built
        # The same build answers the reconstruction that carries what it recorded (a build for one
        # run answers only that run).
        if run is None:
            _BUILT.setdefault(_recorded(built), built)
    return _BUILT[key]


def _selection(run) -> RunSelection | None:
    """What a run worker's run selects: its assets and its checks' assets (None: the whole job)."""
    if not isinstance(run, DagsterRun) or run.asset_selection is None:
        return None
    checks = {c.asset_key for c in run.asset_check_selection or ()}
    return RunSelection(run.run_id, run.job_name, frozenset(run.asset_selection) | checks)
