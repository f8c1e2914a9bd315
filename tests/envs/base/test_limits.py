"""The ``Limits`` record: BaseEnv's limits declared once, and everything derived from it."""

from __future__ import annotations

import dataclasses
import inspect
import math
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from benchmax._rollout_limits import (
    LIMIT_NAMES,
    LIMIT_OPTIONS,
    Limits,
    apply_limits,
    recorded_limits,
)
from benchmax.cli import cli
from benchmax.envs import BaseEnv, Dataset, DatasetSplit
from benchmax.runner import RunConfig, run_definition


class Env(BaseEnv):
    reward_keys = ("r",)
    max_turns = 2

    async def create_dataset(
        self, split: DatasetSplit, base_dir: Path, *, max_examples: int | None = None
    ) -> Dataset[Any]:
        return Dataset([])


def test_the_record_and_base_envs_declared_surface_agree() -> None:
    """A limit added to the record must also be declared on BaseEnv (attribute, parameter)."""
    parameters = inspect.signature(BaseEnv.__init__).parameters
    for item in dataclasses.fields(Limits):
        assert getattr(BaseEnv, item.name) == item.default, item.name
        assert parameters[item.name].kind is inspect.Parameter.KEYWORD_ONLY, item.name
        assert parameters[item.name].default is None, item.name
        assert item.metadata["doc"], item.name
    assert LIMIT_NAMES == (
        "max_turns",
        "max_tool_calls",
        "model_timeout",
        "model_retries",
        "tool_timeout",
        "rollout_timeout",
        "reward_timeout",
    )


@pytest.mark.parametrize(
    ("name", "bad", "message"),
    [
        ("max_turns", 0, "max_turns must be a positive integer"),
        ("max_turns", True, "max_turns must be a positive integer"),
        ("max_tool_calls", -1, "max_tool_calls must be a non-negative integer"),
        ("model_retries", None, "model_retries must be a non-negative integer"),
        ("model_retries", 1.0, "model_retries must be a non-negative integer"),
        ("model_timeout", 0, "model_timeout must be a positive number or None"),
        ("tool_timeout", math.inf, "tool_timeout must be a positive number or None"),
        ("rollout_timeout", False, "rollout_timeout must be a positive number or None"),
        ("reward_timeout", "5", "reward_timeout must be a positive number or None"),
    ],
)
def test_each_limit_is_validated_with_the_contract_message(
    name: str, bad: object, message: str
) -> None:
    with pytest.raises(ValueError, match=f"^{message}$"):
        Limits(**{name: bad})  # type: ignore[arg-type]
    if bad is not None:  # a None argument keeps the class value
        with pytest.raises(ValueError, match=f"^{message}$"):
            Env(**{name: bad})
    env = Env()
    setattr(env, name, bad)
    with pytest.raises(ValueError, match=f"^{message}$"):
        Limits.of(env)


def test_limits_of_an_env_are_its_effective_values() -> None:
    env = Env(tool_timeout=3, model_retries=2)
    assert Limits.of(env) == Limits(max_turns=2, tool_timeout=3, model_retries=2)
    assert Limits.of(object()) == Limits()  # nothing declared: the defaults
    with pytest.raises(dataclasses.FrozenInstanceError):
        Limits().max_turns = 3  # type: ignore[misc]


def test_apply_limits_checks_everything_before_setting_anything() -> None:
    env = Env()
    with pytest.raises(ValueError, match="tool_timeout must be a positive number or None"):
        apply_limits(env, {"model_timeout": 5.0, "tool_timeout": -1})
    assert env.model_timeout is None and "model_timeout" not in vars(env)
    with pytest.raises(ValueError, match=r"not limits: max_turn \(limits: max_turns, "):
        apply_limits(env, {"max_turn": 3})
    apply_limits(env, {"model_timeout": 5.0, "max_turns": 4})
    assert (env.model_timeout, env.max_turns, Env.max_turns) == (5.0, 4, 2)


def test_the_run_definition_records_the_limits_in_record_order(tmp_path: Path) -> None:
    env = Env(reward_timeout=9.5)
    env.tool_timeout = math.nan  # type: ignore[assignment]  # invalid: left to the rollout
    assert recorded_limits(env) == {
        "max_turns": 2,
        "max_tool_calls": None,
        "model_timeout": None,
        "model_retries": 0,
        "rollout_timeout": None,
        "reward_timeout": 9.5,
    }
    config = RunConfig(model="m", base_url="http://x.invalid/v1", base_dir=tmp_path)
    assert run_definition(env, config).fields["limits"] == recorded_limits(env)
    assert recorded_limits(object()) == {}


def test_run_offers_one_option_per_limit_with_an_option() -> None:
    assert [name for name, _ in LIMIT_OPTIONS] == [
        "model_timeout",
        "model_retries",
        "tool_timeout",
        "rollout_timeout",
        "reward_timeout",
    ]
    result = CliRunner().invoke(cli, ["run", "--help"], terminal_width=200)
    assert result.exit_code == 0
    lines = result.output.splitlines()
    for _, option in LIMIT_OPTIONS:
        (line,) = [line for line in lines if line.strip().startswith(option.flag + " ")]
        assert option.metavar in line and option.help in " ".join(line.split())
    refused = CliRunner().invoke(cli, ["run", "x.py:Env", "--model-retries", "-1"])
    assert refused.exit_code == 2 and "--model-retries" in refused.output
