"""``benchmax train``'s coverage check on a real rollout_func call: a run (``_Run``, the
hooks ``train`` gives TRL) whose sequence builder loses a branch stops before TRL trains the
step, with one line naming the cause and the worst rollout; the same run without the loss
records ``token_coverage`` 1.0 in the step's metrics line. The mock server stands in for the
sampler and a namespace for TRL's trainer (no torch)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from examples.calculator.env import CalculatorEnv

from benchmax.integrations.trl import RolloutFunc, dataset_rows, load_examples
from benchmax.results import RolloutsWriter, RunDirectory
from benchmax.runner import RunConfig, run_definition
from benchmax.testing import MockModelServer, RecordedRequest
from benchmax.training import (
    RolloutSequence,
    StopRequest,
    TrainConfig,
    TrainError,
    rollout_sequences,
)
from benchmax.training._ranks import Ranks
from benchmax.training._trainer import _Run
from benchmax.trajectory import Trajectory

CALCULATOR = Path(__file__).resolve().parents[2] / "examples" / "calculator"
TRAINER = SimpleNamespace(
    args=SimpleNamespace(temperature=1.0, top_p=1.0),
    processing_class=SimpleNamespace(eos_token_id=2, pad_token_id=0),
    num_generations=2,
    state=SimpleNamespace(global_step=0),
)


def think_then_answer(body: dict[str, Any], request: RecordedRequest) -> Any:
    if not any(m["role"] == "tool" for m in body["messages"]):
        return {
            "reasoning_content": "add them",
            "tool_calls": [{"name": "add", "arguments": {"a": 1, "b": 2}}],
        }
    return "<answer>3</answer>"


def drops_the_first_branch(trajectory: Trajectory) -> tuple[RolloutSequence, ...]:
    return rollout_sequences(trajectory)[1:]


async def one_step(
    tmp_path: Path, sequences: Callable[[Trajectory], Any]
) -> tuple[_Run, Exception | None]:
    env = CalculatorEnv()
    examples = load_examples(env, "eval", CALCULATOR, max_examples=1)
    config = TrainConfig(
        model="m", output_dir=tmp_path / "run", data=CALCULATOR, group_size=2, prompts_per_step=1
    )
    layout = RunDirectory(config.output_dir)
    layout.root.mkdir(parents=True)
    run = _Run(
        config,
        layout,
        start=0,
        reward_weights=None,
        evaluate_at=lambda step: None,
        stop=StopRequest(),
        on_event=lambda event: None,
        ranks=Ranks(index=0, count=1),
    )
    definition = run_definition(
        env,
        RunConfig(model="m", base_url="http://127.0.0.1:9/v1", base_dir=CALCULATOR, tokens=True),
    )
    run.rollouts = RolloutsWriter(layout.rollouts, definition, prompts_per_step=1)
    prompts = [dataset_rows(examples)[0]["prompt"]] * 2
    failure: Exception | None = None
    async with MockModelServer(think_then_answer, tokens=True) as server:
        url = server.session_url("ROLLOUT").replace("ROLLOUT", "{rollout_id}")
        run.rollout = RolloutFunc(
            env,
            examples,
            base_url=url,
            model="m",
            on_group=run.group_done,
            every_branch=True,
            sequences=sequences,
        )
        try:
            await asyncio.to_thread(run, prompts, TRAINER)
        except TrainError as error:
            failure = error
        finally:
            await asyncio.to_thread(run.rollout.close)
            run.rollouts.close()
    return run, failure


async def test_a_planted_loss_stops_the_run_naming_the_cause(tmp_path: Path) -> None:
    run, failure = await one_step(tmp_path, drops_the_first_branch)
    assert failure is not None
    message = str(failure)
    assert "\n" not in message
    assert message.startswith("step 1: token coverage ")
    assert "is below --min-token-coverage 0.95" in message
    assert "worst rollout trl-0-0-" in message
    assert "(began: first, history_rewritten)" in message
    assert str(run.layout.rollouts) in message  # where to look


async def test_without_a_loss_the_step_records_full_coverage(tmp_path: Path) -> None:
    run, failure = await one_step(tmp_path, rollout_sequences)
    assert failure is None
    line = run.line(1)
    assert line["token_coverage"] == 1.0
    assert line["token_prefix_breaks"] == 2  # both rollouts re-rendered their first reply
