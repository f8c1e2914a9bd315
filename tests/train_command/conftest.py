"""The ``benchmax train`` tests import torch, transformers and TRL and train for minutes:
collect them only when asked for by marker (``pytest -m train``), not in the default run."""

from __future__ import annotations

import pytest


def pytest_ignore_collect(collection_path: object, config: pytest.Config) -> bool | None:
    markers = str(config.getoption("markexpr") or "")
    if "train" in markers.replace("not train", ""):
        return None
    return str(collection_path).endswith(".py") or None
