"""``python -m icelake_assets.demo [--scale demo|test] [--reset]``: build the demo lake and summarize it."""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence

from icelake_assets.catalog.connection import open_catalog
from icelake_assets.demo.lake import SCALES, build_demo_lake, list_orphans
from icelake_assets.settings import load_settings


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m icelake_assets.demo", description=__doc__)
    parser.add_argument("--scale", choices=sorted(SCALES), default="demo", help="table sizes (default: demo)")
    parser.add_argument("--reset", action="store_true", help="drop the demo tables and their files first")
    parser.add_argument(
        "--catalog", default="demo", help="catalog from the settings to build in (default: demo)"
    )
    args = parser.parse_args(argv)

    settings = load_settings()
    started = time.perf_counter()
    refs = build_demo_lake(settings, catalog=args.catalog, scale=args.scale, reset=args.reset)
    elapsed = time.perf_counter() - started

    catalog = open_catalog(settings, args.catalog)
    print(
        f"demo lake ({args.scale}) in catalog {args.catalog!r} from {settings.source}, ready in {elapsed:.1f}s"
    )
    print(f"{'table':<24} {'data files':>10} {'snapshots':>10} {'orphans':>8}")
    for ref in refs:
        table = catalog.load_table(ref.identifier)
        snapshot = table.current_snapshot()
        files = int(snapshot.summary["total-data-files"] or 0) if snapshot and snapshot.summary else 0
        print(f"{str(ref):<24} {files:>10} {len(table.snapshots()):>10} {len(list_orphans(table)):>8}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
