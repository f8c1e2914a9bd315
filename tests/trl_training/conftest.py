"""The TRL tests import torch, transformers and trl (tens of seconds): collect them only
when asked for by marker (``pytest -m trl`` / ``-m smollm``), not in the default run."""

from __future__ import annotations

import pytest


def pytest_ignore_collect(collection_path: object, config: pytest.Config) -> bool | None:
    markers = str(config.getoption("markexpr") or "")
    if "trl" in markers.replace("not trl", "") or "smollm" in markers.replace("not smollm", ""):
        return None
    return str(collection_path).endswith(".py") or None
