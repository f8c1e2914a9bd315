"""Run settings shared by the sources tests."""

from __future__ import annotations

from typing import Any

from benchmax.auth import StaticBearerAuth
from benchmax.runner import RunConfig
from benchmax.testing import MockModelServer


def run_config(mock: MockModelServer, **changes: Any) -> RunConfig:
    """A run against ``mock`` with one session per rollout (policies read ``r<k>``)."""
    options: dict[str, Any] = {
        "model": "m",
        "base_url": mock.session_url("{rollout_id}"),
        "model_auth": StaticBearerAuth("mock-key-0123"),
        "group_size": 2,
        "output": None,
        "split": "train",
        "judge_check": False,
    }
    options.update(changes)
    return RunConfig(**options)
