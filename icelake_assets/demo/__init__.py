"""A demo lake of degraded Iceberg tables (small files, many snapshots, orphans), built with pyiceberg."""

from icelake_assets.demo.assets import DEMO_LINEAGE
from icelake_assets.demo.lake import (
    SCALES,
    DemoScale,
    add_snapshots,
    age_all_files,
    build_demo_lake,
    degrade_trips,
    list_orphans,
    plant_orphans,
)
from icelake_assets.orchestration.assets.lineage import register_lineage_builders

__all__ = [
    "SCALES",
    "DemoScale",
    "add_snapshots",
    "age_all_files",
    "build_demo_lake",
    "degrade_trips",
    "list_orphans",
    "plant_orphans",
]

# The demo's writer and consumer assets, for the tables whose lineage names their keys (its
# icelake.yaml does): registered whenever the demo is imported, as orchestration does not import it.
register_lineage_builders("demo", DEMO_LINEAGE)
