"""ReasoningGymEnv against reasoning-gym's own generators and scorers."""

from __future__ import annotations

import os
import pickle
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import cloudpickle
import pytest
from click.testing import CliRunner
from tests.sources.running import run_config

from benchmax.auth import StaticBearerAuth
from benchmax.bundle import dump_bundle, load_bundle, read_bundle
from benchmax.cli import cli
from benchmax.envs import Example, RolloutRequest
from benchmax.runner import run_environment
from benchmax.sources.reasoning_gym import EVAL_SEED_OFFSET, ReasoningGymEnv
from benchmax.testing import MockModelServer, RecordedRequest, message_text
from benchmax.trajectory import Trajectory

rg = pytest.importorskip("reasoning_gym")
rg_utils = pytest.importorskip("reasoning_gym.utils")

REPO = Path(__file__).resolve().parents[2]
_THINK = re.compile(r"<think>.*?</think>", re.DOTALL)


def rollout_index(request: RecordedRequest) -> int:
    match = re.search(r"\.r(\d+)$", request.session)
    return int(match.group(1)) if match else 0


def replies_for(answer: str) -> list[str]:
    """What rollout k of a group replies: right, wrong, right only inside the reasoning,
    right with extra words (partial credit from some scorers), and a bare reply."""
    return [
        f"<think>Working it out.</think>\n<answer>{answer}</answer>",
        "<answer>definitely not it</answer>",
        f"<think>maybe <answer>{answer}</answer></think> I give up.",
        f"<answer>{answer} or so</answer>",
        answer,
    ]


def knowing_policy(entries: dict[str, dict[str, Any]]) -> Any:
    def reply(body: dict[str, Any], request: RecordedRequest) -> str:
        question = message_text(body["messages"][-1]["content"])
        answers = replies_for(str(entries[question]["answer"]))
        return answers[rollout_index(request) % len(answers)]

    return reply


def expected_score(dataset: Any, entry: dict[str, Any], reply: str) -> float:
    """reasoning-gym's own reading: its extract_answer outside the <think> blocks."""
    return float(dataset.score_answer(rg_utils.extract_answer(_THINK.sub("", reply)), entry))


@pytest.mark.parametrize(
    ("task", "config"),
    [
        ("chain_sum", {"min_terms": 3, "max_terms": 4}),
        ("leg_counting", {}),
        ("spell_backward", {}),
    ],
)
async def test_rewards_are_the_tasks_own_scores_of_the_same_replies(
    task: str, config: dict[str, Any]
) -> None:
    env = ReasoningGymEnv(task, size=4, seed=7, config=config)
    dataset = rg.create_dataset(task, seed=7, size=4, **config)
    entries = {entry["question"]: entry for entry in dataset}
    groups: list[tuple[Trajectory, ...]] = []
    async with MockModelServer(knowing_policy(entries)) as mock:
        report = await run_environment(env, run_config(mock, group_size=5), on_group=groups.append)
    assert report.rollouts == 20 and report.rollouts_by_reason == {"finished": 20}
    seen_scores = set()
    for group in groups:
        for trajectory in group:
            question = message_text(trajectory.messages[-2]["content"])
            reply = message_text(trajectory.messages[-1]["content"])
            expected = expected_score(dataset, entries[question], reply)
            assert trajectory.rewards == {"score": pytest.approx(expected)}
            seen_scores.add(round(expected, 6))
    assert 1.0 in seen_scores and 0.0 in seen_scores


async def test_the_prompt_is_reasoning_gyms_default_system_prompt_then_the_question() -> None:
    env = ReasoningGymEnv("chain_sum", size=2, seed=1)
    [first, _] = await env.create_dataset("train", Path("."))
    assert first.payload["prompt_messages"] == [
        {"role": "system", "content": rg_utils.SYSTEM_PROMPTS["default"]},
        {"role": "user", "content": rg.create_dataset("chain_sum", seed=1, size=2)[0]["question"]},
    ]
    plain = ReasoningGymEnv("chain_sum", size=1, seed=1, system_prompt="")
    [only] = await plain.create_dataset("train", Path("."))
    assert [m["role"] for m in only.payload["prompt_messages"]] == ["user"]


async def test_ids_are_stable_and_the_splits_come_from_disjoint_seeds() -> None:
    first = ReasoningGymEnv("leg_counting", size=6, seed=3, eval_size=4)
    again = ReasoningGymEnv("leg_counting", size=6, seed=3, eval_size=4)
    train = await first.create_dataset("train", Path("."))
    assert [e.id for e in train] == [e.id for e in await again.create_dataset("train", Path("."))]
    assert len({e.id for e in train}) == 6
    evaluation = await first.create_dataset("eval", Path("."))
    assert len(evaluation) == 4 and not {e.id for e in train} & {e.id for e in evaluation}
    expected = rg.create_dataset("leg_counting", seed=3 + EVAL_SEED_OFFSET, size=4)
    assert [e.payload["prompt_messages"][-1]["content"] for e in evaluation] == [
        entry["question"] for entry in expected
    ]
    other_seed = await ReasoningGymEnv("leg_counting", size=6, seed=4).create_dataset(
        "train", Path(".")
    )
    assert {e.id for e in train}.isdisjoint({e.id for e in other_seed})
    assert len(await first.create_dataset("train", Path("."), max_examples=2)) == 2


async def test_a_pickled_or_bundled_environment_scores_the_same(tmp_path: Path) -> None:
    env = ReasoningGymEnv("chain_sum", size=3, seed=11)
    [example, *_] = await env.create_dataset("train", Path("."))
    answer = example.payload["answer"]
    bundle_file = tmp_path / "chain_sum.bundle"
    made = CliRunner().invoke(
        cli,
        [
            "bundle", "reasoning-gym", "--env-arg", "task=chain_sum", "--env-arg", "size=3",
            "--env-arg", "seed=11", "--pip-dependency", "reasoning-gym==0.1.25",
            "-o", str(bundle_file),
        ],
    )  # fmt: skip
    assert made.exit_code == 0, made.output
    copies = [
        pickle.loads(cloudpickle.dumps(env)),
        load_bundle(read_bundle(bundle_file)),
        load_bundle(
            dump_bundle(
                ReasoningGymEnv, constructor_args={"task": "chain_sum", "size": 3, "seed": 11}
            )
        ),
    ]
    async with MockModelServer(lambda body, request: f"<answer>{answer}</answer>") as mock:
        for copy in copies:
            [copied, *_] = await copy.create_dataset("train", Path("."))
            assert copied.id == example.id
            outcomes = await copy.run_group([request_for(example, mock.base_url)])
            assert outcomes["r0"].rewards == {"score": 1.0}


async def test_a_question_the_generator_no_longer_makes_settles_as_reward_error() -> None:
    env = ReasoningGymEnv("chain_sum", size=3, seed=11)
    [first, second, _] = await env.create_dataset("train", Path("."))
    moved = dict(first.payload)
    moved["reasoning_gym"] = {**first.payload["reasoning_gym"], "index": 1}  # not its question
    assert second.payload["prompt_messages"] != first.payload["prompt_messages"]
    async with MockModelServer(lambda body, request: "<answer>1</answer>") as mock:
        outcomes = await env.run_group([request_for(Example(first.id, moved), mock.base_url)])
    assert outcomes["r0"].termination_reason == "reward_error"
    assert outcomes["r0"].rewards == {"score": 0.0}


def request_for(example: Example[Any], base_url: str) -> RolloutRequest[Any]:
    return RolloutRequest(
        rollout_id="r0",
        example=example,
        model="m",
        base_url=base_url,
        model_auth=StaticBearerAuth("mock-key-0123"),
    )


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"task": "chain_summ"}, "task 'chain_summ' is not a reasoning-gym task (did you mean"),
        ({"task": 3}, "task must be a task name"),
        ({"task": "chain_sum", "size": 0}, "size must be an integer from 1"),
        ({"task": "chain_sum", "size": True}, "size must be an integer from 1"),
        ({"task": "chain_sum", "eval_size": 10**9}, "eval_size must be an integer from 1"),
        ({"task": "chain_sum", "seed": -1}, "seed must be a non-negative integer"),
        ({"task": "chain_sum", "config": {"nope": 1}}, "config field 'nope' is not an option"),
        ({"task": "chain_sum", "config": {"seed": 1}}, "config must not set seed"),
        ({"task": "chain_sum", "config": {"min_terms": 0}}, "config for chain_sum is invalid"),
        ({"task": "chain_sum", "config": [1]}, "config must be a JSON object"),
        ({"task": "chain_sum", "system_prompt": 1}, "system_prompt must be a string"),
        ({"task": "chain_sum", "max_turnz": 2}, "max_turnz"),
    ],
)
def test_a_bad_constructor_argument_is_one_error_naming_it(
    arguments: dict[str, Any], message: str
) -> None:
    with pytest.raises((ValueError, TypeError)) as raised:
        ReasoningGymEnv(**arguments)
    assert message in str(raised.value) and "\n" not in str(raised.value)


def test_benchmax_run_takes_the_installed_name_and_the_example_policy(tmp_path: Path) -> None:
    output = tmp_path / "run.jsonl"
    result = CliRunner().invoke(
        cli,
        [
            "run", "reasoning-gym", "--env-arg", "task=chain_sum", "--env-arg", "size=3",
            "-k", "2", "--mock-policy", str(REPO / "examples/arithmetic_gym/policy.py") + ":reply",
            "-o", str(output),
        ],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert len(output.read_text().splitlines()) == 1 + 3 * 2
    assert "ReasoningGymEnv" in output.read_text().splitlines()[0]
    bad = CliRunner().invoke(cli, ["run", "reasoning-gym", "--env-arg", "task=nope"])
    [line] = bad.output.strip().splitlines()
    assert line.startswith("Error: cannot construct ReasoningGymEnv: ValueError: ")


def test_third_party_syntax_warnings_are_silenced_at_import(tmp_path: Path) -> None:
    """cellpylib's ``SyntaxWarning``s show whenever Python compiles it (no bytecode cache:
    an empty ``PYTHONPYCACHEPREFIX`` forces that); the environment silences those only."""
    code = (
        "import warnings\n"
        "from benchmax.sources.reasoning_gym import _registry\n"
        "_registry()\n"
        "compile('x is \"a\"', 'mine.py', 'exec')\n"  # the user's own: still shown
    )
    env = {**os.environ, "PYTHONPYCACHEPREFIX": str(tmp_path / "pycache")}
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr
    assert "cellpylib" not in done.stderr, done.stderr
    assert "mine.py:1: SyntaxWarning" in done.stderr
