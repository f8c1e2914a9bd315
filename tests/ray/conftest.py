"""One local Ray cluster (2 CPUs, no dashboard) shared by every test marked ``ray``.

Every test in this directory that needs the cluster asks for ``ray_cluster``; runs then
reuse this process's connection instead of starting their own instance.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from types import ModuleType

import pytest


@pytest.fixture(scope="session")
def ray_cluster() -> Iterator[ModuleType]:
    # Local workers share this interpreter: no per-worker copy of a `uv run` environment.
    os.environ.setdefault("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=2, include_dashboard=False, logging_level=logging.WARNING)
    try:
        yield ray
    finally:
        ray.shutdown()
