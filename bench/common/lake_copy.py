"""A cached lake copied for a run: the catalog database, which changes in place, copied; Iceberg's
immutable files hard-linked (``shutil.copytree(..., copy_function=link_or_copy)``)."""

import os
import shutil
from pathlib import Path


def link_or_copy(src: str, dst: str) -> None:
    # The catalog database changes in place: copy it. Iceberg files are never rewritten: link them.
    if Path(src).name.startswith("catalog.db"):
        shutil.copy2(src, dst)
    else:
        os.link(src, dst)
