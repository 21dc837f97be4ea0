"""A user's Dagster project embedding the product, for the chaos soak's backfills (bench/soak/backfill.py).

The product's own code location (icelake_assets.definitions) runs every job in process; a user's
project that adds the product with ``icelake_definitions`` keeps its own executor, Dagster's default
(multiprocess: every step a process of its own), for the implicit asset job its partition runs and
backfills use. This module is that project: the lake of $ICELAKE_CONFIG and no executor of its own.
``defs`` (a ``@definitions`` function, as a user writes one) is what the run worker and each step
process load, as ``dagster asset materialize -m bench.soak.project`` would.
"""

from __future__ import annotations

import os

from dagster import Definitions, definitions

from icelake_assets.settings.loader import CONFIG_ENV_VAR

# Dagster's default executor, asked for explicitly: every step a process of its own.
MULTIPROCESS_RUN_CONFIG = {"execution": {"config": {"multiprocess": {"max_concurrent": 2}}}}


def project_definitions() -> Definitions:
    from icelake_assets.embedding import icelake_definitions

    return icelake_definitions(os.environ[CONFIG_ENV_VAR])


@definitions
def defs() -> Definitions:
    return project_definitions()
