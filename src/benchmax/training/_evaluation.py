"""Evaluate the weights a training run has now: the eval split through the runner.

Each evaluation is an ordinary ``run_environment`` run into ``eval/step-N.jsonl`` (so
``show``, ``view`` and ``compare`` read it); the definition records the step and a fixed
base URL marker, so re-running an evaluation that is already complete (a resumed run)
makes no model call. ``benchmax.results.compare_base`` pairs the base evaluation with the
last one.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Any

from benchmax.auth import ModelAuth
from benchmax.envs import Environment
from benchmax.results import RunDirectory
from benchmax.runner import RunConfig, RunReport
from benchmax.runner import run_environment as _run_environment
from benchmax.training._config import TrainConfig

__all__ = [
    "EMBEDDED_SAMPLER_URL",
    "eval_sampling_args",
    "evaluate",
    "sampling_args",
]

EMBEDDED_SAMPLER_URL = "benchmax-embedded-sampler"
"""What results headers record as the base URL of the embedded sampler (its port changes)."""


def sampling_args(config: TrainConfig) -> dict[str, object]:
    """The request fields every training and eval rollout sends."""
    return {
        "temperature": config.temperature,
        "top_p": config.top_p,
        "max_tokens": config.max_tokens,
    }


def eval_sampling_args(config: TrainConfig) -> dict[str, object]:
    """The request fields every eval rollout sends: the training ones at
    ``eval_temperature`` (when set; 0 asks for greedy decoding)."""
    args = sampling_args(config)
    if config.eval_temperature is not None:
        args["temperature"] = config.eval_temperature
    return args


def evaluate(
    config: TrainConfig,
    layout: RunDirectory,
    step: int,
    *,
    env: Callable[..., Environment[Any, Any]],
    base_url: str,
    auth_providers: Mapping[str, ModelAuth],
    env_definition: Mapping[str, object] | None,
    judge_check: bool,
) -> RunReport:
    """Run the eval split against ``base_url`` into ``eval/step-{step}.jsonl`` (resumed
    when it is there); a fresh environment is built for it and closed after."""
    run = RunConfig(
        model=config.served_model,
        base_url=base_url,
        auth_providers=dict(auth_providers),
        split="eval",
        base_dir=config.data,
        group_size=config.eval_group_size,
        max_examples=config.eval_examples,
        sampling_args=eval_sampling_args(config),
        output=layout.eval_file(step),
        constructor_args=config.env_args,
        env_definition=env_definition,
        definition_extras={"training_step": step, "training_model": config.model},
        recorded_base_url=EMBEDDED_SAMPLER_URL if config.base_url is None else None,
        seed=config.seed,
        judge_check=judge_check,
        max_failure_share=1.0,
    )

    async def go() -> RunReport:
        instance = env(**config.env_args)
        try:
            return await _run_environment(instance, run)
        finally:
            await instance.aclose()

    return asyncio.run(go())
