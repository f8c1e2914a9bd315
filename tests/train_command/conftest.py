"""The ``benchmax train`` tests import torch, transformers and TRL and train for minutes:
collect them only when asked for by marker (``pytest -m train``), not in the default run."""

from __future__ import annotations

from pathlib import Path

import pytest


def pytest_ignore_collect(collection_path: object, config: pytest.Config) -> bool | None:
    markers = str(config.getoption("markexpr") or "")
    if "train" in markers.replace("not train", ""):
        return None
    return str(collection_path).endswith(".py") or None


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A randomly initialised 2-layer Qwen2 and its tokenizer, saved as a model directory."""
    from tests.trl_training.tiny_policy import build_model, build_tokenizer

    directory = tmp_path_factory.mktemp("tiny-model")
    tokenizer = build_tokenizer()
    build_model(tokenizer).save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory
