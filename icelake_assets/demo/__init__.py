"""A demo lake of degraded Iceberg tables (small files, many snapshots, orphans), built with pyiceberg."""

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
