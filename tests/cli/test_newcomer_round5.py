"""Issue 38 item 14, what a newcomer hit: a plain-def ``create_dataset`` named with its fix;
``--rollouts`` suggests ``-k/--group-size``; an ``--env-arg`` the constructor does not take
gets "did you mean"; a raising reward hook shows its file:line; a reward key missing from
``compute_reward``'s rewards names ``compute_reward``."""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path

from click.testing import Result
from tests.cli.conftest import REPO

QUICKSTART = REPO / "examples" / "quickstart"
QUICKSTART_ENV = f"{QUICKSTART}/env.py:QuickStartEnv"

PLAIN_DATASET = """
from benchmax.envs import BaseEnv, Dataset, Example


class PlainDatasetEnv(BaseEnv):
    reward_keys = ("correct",)
    max_turns = 1

    def create_dataset(self, split, base_dir, *, max_examples=None):
        prompt = [{"role": "user", "content": "hi"}]
        return Dataset([Example(id="e0", payload={"prompt_messages": prompt})])

    async def compute_reward(self, rollout):
        return {"correct": 1.0}
"""

REWARD_HOOKS = """
from benchmax.envs import BaseEnv, Dataset, Example


class HookEnv(BaseEnv):
    reward_keys = ("correct", "format")
    max_turns = 1

    async def create_dataset(self, split, base_dir, *, max_examples=None):
        prompt = [{"role": "user", "content": "hi"}]
        return Dataset([Example(id="e0", payload={"prompt_messages": prompt})])

    async def compute_reward(self, rollout):
        if self.broken:
            raise KeyError("answer")
        return {"correct": 1.0}
"""


def write_env(tmp_path: Path, name: str, source: str) -> Path:
    path = tmp_path / f"{name}.py"
    path.write_text(textwrap.dedent(source))
    return path


def error_line(result: Result) -> str:
    errors = [line for line in result.output.splitlines() if line.startswith("Error: ")]
    assert errors, result.output
    return errors[-1]


def test_a_plain_def_create_dataset_is_named_with_its_fix(
    invoke: Callable[..., Result], tmp_path: Path
) -> None:
    env = write_env(tmp_path, "plain_dataset_env", PLAIN_DATASET)
    result = invoke("run", f"{env}:PlainDatasetEnv", "--data", tmp_path, "-o", tmp_path / "o")
    assert result.exit_code == 3, result.output
    line = error_line(result)
    assert "PlainDatasetEnv.create_dataset is not async" in line, line
    assert "write it as 'async def create_dataset(...)'" in line
    assert "can't be used in 'await' expression" not in line


def test_rollouts_suggests_group_size(invoke: Callable[..., Result]) -> None:
    result = invoke("run", QUICKSTART_ENV, "--rollouts", "8")
    assert result.exit_code == 2
    assert "Did you mean '-k/--group-size'?" in result.output, result.output
    assert "--rollout-timeout" not in result.output
    # an unknown option with no alias keeps click's own suggestion
    close = invoke("run", QUICKSTART_ENV, "--group-siz", "8")
    assert "Did you mean --group-size?" in close.output or "--group-size" in close.output


def test_an_env_arg_the_constructor_does_not_take_gets_did_you_mean(
    invoke: Callable[..., Result], tmp_path: Path
) -> None:
    result = invoke(
        "run", QUICKSTART_ENV, "--data", QUICKSTART, "--env-arg", "max_turn=3",
        "-o", tmp_path / "o.jsonl",
    )  # fmt: skip
    assert result.exit_code == 3
    assert "unexpected keyword argument 'max_turn' (did you mean 'max_turns'?)" in error_line(
        result
    )


def test_a_raising_reward_hook_shows_its_file_and_line(
    invoke: Callable[..., Result], tmp_path: Path
) -> None:
    source = REWARD_HOOKS.replace("    max_turns = 1", "    max_turns = 1\n    broken = True")
    env = write_env(tmp_path, "raising_hook_env", source)
    result = invoke("run", f"{env}:HookEnv", "--data", tmp_path, "-o", tmp_path / "o.jsonl")
    text = " ".join(result.output.split())
    assert "reward_error, e.g. rollout " in text
    assert "KeyError: 'answer' (at raising_hook_env.py:16 in compute_reward)" in text, text


def test_a_reward_key_missing_from_compute_reward_names_it(
    invoke: Callable[..., Result], tmp_path: Path
) -> None:
    source = textwrap.dedent(REWARD_HOOKS).replace(
        "    max_turns = 1", "    max_turns = 1\n    broken = False"
    )
    env = write_env(tmp_path, "missing_key_env", source)
    result = invoke("run", f"{env}:HookEnv", "--data", tmp_path, "-o", tmp_path / "o.jsonl")
    text = " ".join(result.output.split())
    assert "missing=['format']" in text, text
    assert "(raised by HookEnv.compute_reward)" in text
