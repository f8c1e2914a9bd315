"""Tests for the contract types of ``benchmax.envs.shared_types``."""

from __future__ import annotations

import dataclasses
import math
import pickle
import typing
from collections.abc import Mapping
from typing import Any

import cloudpickle
import pytest

from benchmax.auth import StaticBearerAuth
from benchmax.envs import shared_types
from benchmax.envs.shared_types import (
    DatasetSplit,
    Example,
    RewardMap,
    RolloutAttempt,
    RolloutFailure,
    RolloutOutcome,
    RolloutRequest,
)

EXAMPLE = Example(id="e", payload={"a": 1})


def make_request(**overrides: Any) -> RolloutRequest[dict[str, Any]]:
    fields: dict[str, Any] = {
        "rollout_id": "r",
        "example": EXAMPLE,
        "model": "m",
        "base_url": "http://127.0.0.1:1/sessions/abc/v1",
        "model_auth": StaticBearerAuth("secret-session-key"),
    }
    fields.update(overrides)
    return RolloutRequest(**fields)


# Aliases ---------------------------------------------------------------------


def test_dataset_split_and_reward_map_aliases() -> None:
    assert typing.get_args(DatasetSplit) == ("train", "eval")
    assert isinstance(RewardMap, typing.TypeAliasType)
    assert RewardMap.__name__ == "RewardMap"
    assert RewardMap.__value__ == Mapping[str, float]


# Example ---------------------------------------------------------------------


def test_example_construction_repr_and_identity_of_payload() -> None:
    payload = {"a": 1}
    positional = Example("e", payload)
    assert positional == Example(id="e", payload={"a": 1})
    assert positional.payload is payload
    assert repr(EXAMPLE) == "Example(id='e', payload={'a': 1})"
    with pytest.raises(dataclasses.FrozenInstanceError):
        positional.id = "f"  # type: ignore[misc]
    assert not hasattr(positional, "__dict__")


@pytest.mark.parametrize("bad_id", ["", "  \n", None, 1])
def test_example_rejects_blank_id(bad_id: object) -> None:
    with pytest.raises(ValueError, match="example id must be a non-empty string"):
        Example(id=bad_id, payload={})  # type: ignore[arg-type]


def test_example_is_generic_and_subclassable() -> None:
    alias = Example[dict[str, Any]]
    assert typing.get_origin(alias) is Example
    assert RolloutRequest[dict[str, Any]].__origin__ is RolloutRequest

    @dataclasses.dataclass(frozen=True, slots=True)
    class Tagged(Example[dict[str, Any]]):
        tag: str = "t"

    assert Tagged(id="e", payload={}).tag == "t"


def test_example_hashable_with_hashable_payload_and_pickles() -> None:
    example = Example(id="e", payload=("a", 1))
    assert hash(example) == hash(Example(id="e", payload=("a", 1)))
    assert pickle.loads(pickle.dumps(EXAMPLE)) == EXAMPLE
    assert cloudpickle.loads(cloudpickle.dumps(EXAMPLE)) == EXAMPLE


# RolloutRequest --------------------------------------------------------------


def test_request_keeps_base_url_and_hides_auth_from_repr() -> None:
    request = make_request()
    assert request.base_url == "http://127.0.0.1:1/sessions/abc/v1"
    assert "secret-session-key" not in repr(request)
    assert "model_auth" not in repr(request)
    assert repr(make_request(base_url="u")) == (
        "RolloutRequest(rollout_id='r', example=Example(id='e', payload={'a': 1}), "
        "model='m', base_url='u', split='train')"
    )


def test_request_field_order_and_split_default() -> None:
    assert [f.name for f in dataclasses.fields(RolloutRequest)] == [
        "rollout_id",
        "example",
        "model",
        "base_url",
        "model_auth",
        "split",
        "sampling_args",
        "record_tokens",  # issue 17: additive, defaulted
    ]
    assert make_request().split == "train"
    assert make_request().record_tokens is False
    assert repr(make_request(base_url="u", record_tokens=True)).endswith(
        "split='train', record_tokens=True)"
    )
    with pytest.raises(TypeError, match="record_tokens must be True or False"):
        make_request(record_tokens="yes")
    assert make_request(split="eval").split == "eval"
    positional = RolloutRequest("r", EXAMPLE, "m", "u", StaticBearerAuth("k"), "eval")
    assert positional.split == "eval"


@pytest.mark.parametrize(
    ("overrides", "error", "message"),
    [
        ({"rollout_id": " "}, ValueError, "rollout_id must be a non-empty string"),
        ({"rollout_id": None}, ValueError, "rollout_id must be a non-empty string"),
        ({"model": ""}, ValueError, "model must be a non-empty string"),
        ({"base_url": "\t"}, ValueError, "base_url must be a non-empty string"),
        ({"model_auth": "secret"}, TypeError, "model_auth must implement ModelAuth"),
        ({"split": "validation"}, ValueError, "split must be 'train' or 'eval'"),
        # Validation runs in field order: the first failing rule wins.
        ({"rollout_id": "", "model": ""}, ValueError, "rollout_id must be"),
        ({"model": "", "model_auth": None}, ValueError, "model must be"),
        ({"model_auth": None, "split": "x"}, TypeError, "model_auth must implement"),
    ],
)
def test_request_validation(
    overrides: dict[str, Any], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        make_request(**overrides)


def test_request_example_is_not_validated_and_request_pickles() -> None:
    assert make_request(example="anything").example == "anything"
    request = make_request()
    assert pickle.loads(pickle.dumps(request)) == request


# RolloutAttempt --------------------------------------------------------------


def test_attempt_is_keyword_only_with_default_rewards() -> None:
    with pytest.raises(TypeError):
        RolloutAttempt("r", "finished")  # type: ignore[misc]
    attempt = RolloutAttempt(rollout_id="r", termination_reason="finished")
    assert attempt.rewards is None
    scored = RolloutAttempt(
        rollout_id="r", termination_reason="finished", rewards={"correctness": 1.0}
    )
    assert scored.rewards == {"correctness": 1.0}
    assert [f.name for f in dataclasses.fields(RolloutAttempt)] == [
        "rollout_id",
        "termination_reason",
        "rewards",
    ]
    assert pickle.loads(pickle.dumps(scored)) == scored


@pytest.mark.parametrize(
    ("fields", "error", "message"),
    [
        ({"rollout_id": ""}, ValueError, "rollout_id must be a non-empty string"),
        ({"termination_reason": " "}, ValueError, "termination_reason must be a non-empty"),
        ({"termination_reason": None}, ValueError, "termination_reason must be a non-empty"),
        ({"rewards": {}}, ValueError, "rewards must contain the env's reward keys"),
        ({"rewards": [("a", 1.0)]}, TypeError, "rewards must be a mapping"),
        ({"rewards": {"a": math.nan}}, ValueError, "reward 'a' must be finite"),
        ({"rollout_id": "", "rewards": {}}, ValueError, "rollout_id"),
    ],
)
def test_attempt_validation(fields: dict[str, Any], error: type[Exception], message: str) -> None:
    values: dict[str, Any] = {"rollout_id": "r", "termination_reason": "finished", **fields}
    with pytest.raises(error, match=message):
        RolloutAttempt(**values)


# RolloutOutcome and the reward-map rule --------------------------------------


def test_outcome_accepts_zero_rewards_for_failure_reason() -> None:
    rewards = {"correctness": 0.0}
    outcome = RolloutOutcome(rewards=rewards, termination_reason="context_exceeded")
    assert outcome.rewards is rewards
    assert outcome.termination_reason == "context_exceeded"
    assert RolloutOutcome(rewards, "finished") == RolloutOutcome(
        rewards={"correctness": 0.0}, termination_reason="finished"
    )


def test_outcome_keeps_integers_as_is() -> None:
    outcome = RolloutOutcome(rewards={"a": 1, "b": 10**400}, termination_reason="finished")
    assert type(outcome.rewards["a"]) is int


@pytest.mark.parametrize(
    ("rewards", "error", "message"),
    [
        ({}, ValueError, "rewards must contain the env's reward keys"),
        ({"correctness": True}, ValueError, "reward 'correctness' must be numeric"),
        ({"correctness": "1"}, ValueError, "reward 'correctness' must be numeric"),
        ({"correctness": None}, ValueError, "reward 'correctness' must be numeric"),
        ({"correctness": math.nan}, ValueError, "reward 'correctness' must be finite"),
        ({"correctness": math.inf}, ValueError, "reward 'correctness' must be finite"),
        ({"correctness": -math.inf}, ValueError, "reward 'correctness' must be finite"),
        ({"": 1.0}, ValueError, "reward keys must be non-empty strings"),
        ({"  ": 1.0}, ValueError, "reward keys must be non-empty strings"),
        ({1: 1.0}, ValueError, "reward keys must be non-empty strings"),
        ("correctness", TypeError, "rewards must be a mapping"),
        (None, TypeError, "rewards must be a mapping"),
        # Items are checked in iteration order.
        ({"a": math.nan, "": 1.0}, ValueError, "reward 'a' must be finite"),
    ],
)
def test_outcome_rejects_invalid_reward_maps(
    rewards: object, error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        RolloutOutcome(rewards=rewards, termination_reason="finished")  # type: ignore[arg-type]


def test_outcome_checks_termination_reason_first() -> None:
    with pytest.raises(ValueError, match="termination_reason must be a non-empty string"):
        RolloutOutcome(rewards={}, termination_reason="")


# RolloutFailure --------------------------------------------------------------


def test_rollout_failure_message_and_reason() -> None:
    failure = RolloutFailure("x", "msg")
    assert isinstance(failure, RuntimeError)
    assert str(failure) == "msg"
    assert failure.args == ("msg",)
    assert failure.termination_reason == "x"


@pytest.mark.parametrize(
    ("reason", "message"),
    [
        ("finished", "a rollout failure cannot terminate as 'finished'"),
        ("", "termination_reason must be a non-empty string"),
        ("   ", "termination_reason must be a non-empty string"),
        (None, "termination_reason must be a non-empty string"),
    ],
)
def test_rollout_failure_rejects_bad_reason(reason: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        RolloutFailure(reason, "msg")  # type: ignore[arg-type]


class JudgeLikeError(RolloutFailure):
    """Mirrors ``JudgeError``: one-argument constructor, fixed reason."""

    def __init__(self, message: str) -> None:
        super().__init__("judge_error", message)


@pytest.mark.parametrize("dumps", [pickle.dumps, cloudpickle.dumps])
def test_rollout_failures_survive_pickling(dumps: Any) -> None:
    failure = RolloutFailure("sandbox_error", "sandbox crashed")
    failure.add_note("extra context")
    restored = pickle.loads(dumps(failure))
    assert type(restored) is RolloutFailure
    assert restored.args == ("sandbox crashed",)
    assert restored.termination_reason == "sandbox_error"
    assert restored.__notes__ == ["extra context"]

    judge = pickle.loads(dumps(JudgeLikeError("judge down")))
    assert type(judge) is JudgeLikeError
    assert str(judge) == "judge down"
    assert judge.termination_reason == "judge_error"


def test_module_all() -> None:
    assert shared_types.__all__ == [
        "DatasetSplit",
        "Example",
        "RewardMap",
        "RolloutAttempt",
        "RolloutFailure",
        "RolloutOutcome",
        "RolloutRequest",
    ]


def test_request_sampling_args_are_validated_copied_and_shown_in_repr() -> None:
    args = {"temperature": 0.7, "chat_template_kwargs": {"enable_thinking": False}}
    request = make_request(base_url="u", sampling_args=args)
    assert request.sampling_args == args and request.sampling_args is not args
    assert repr(request).endswith(
        "split='train', sampling_args={'temperature': 0.7, "
        "'chat_template_kwargs': {'enable_thinking': False}})"
    )
    for key in ("model", "messages", "tools"):
        with pytest.raises(ValueError, match=f"must not set '{key}'"):
            make_request(sampling_args={key: 1})
    with pytest.raises(ValueError, match=r"sampling_args\['seed'\] must be JSON-serializable"):
        make_request(sampling_args={"seed": object()})
    with pytest.raises(ValueError, match="JSON-serializable"):
        make_request(sampling_args={"temperature": float("nan")})
    with pytest.raises(TypeError, match="must be a mapping"):
        make_request(sampling_args=[("temperature", 1)])
    with pytest.raises(ValueError, match="must not set 'stream' to true"):
        make_request(sampling_args={"stream": True})
    assert make_request(sampling_args={"stream": False}).sampling_args == {"stream": False}
    with pytest.raises(ValueError, match=r"sampling_args\['n'\] must be 1, got 4"):
        make_request(sampling_args={"n": 4})
    assert make_request(sampling_args={"n": 1}).sampling_args == {"n": 1}
    assert cloudpickle.loads(cloudpickle.dumps(request)).sampling_args == args


# -- built-in termination reasons -------------------------------------------------------------

_REASON_CONSTANTS = {
    name: value
    for name, value in vars(shared_types).items()
    if name.isupper() and isinstance(value, str)
}


def test_termination_reason_literal_lists_every_constant_once() -> None:
    listed = typing.get_args(shared_types.TerminationReason)
    assert len(listed) == len(set(listed)) == 27  # 23, then 4 for agent programs (issue 37)
    assert sorted(_REASON_CONSTANTS.values()) == sorted(listed)
    for name, value in _REASON_CONSTANTS.items():
        assert name == value.upper()


def test_termination_reasons_cover_the_documented_ones() -> None:
    documented = {
        # envs.md "Termination-reason validation", beyond.md §2 and §7
        "finished",
        "context_exceeded",
        "output_exceeded",
        "max_turns_exceeded",
        "tool_budget_exceeded",
        "model_error",
        "tool_error",
        "reward_error",
        "group_reward_error",
        "judge_error",
        "harness_timeout",
        "harness_error",
        "sandbox_error",
        "verifier_timeout",
        "verifier_error",
        "unknown",
        "model_timeout",
        "tool_timeout",
        "rollout_timeout",
        "reward_timeout",
        "content_filter",
        "setup_error",  # beyond.md §9
        "simulated_user_error",  # issue 20: BaseEnv.user_turn failed
        # issue 37: AgentEnv programs (docs/agents.md "Termination reasons")
        "no_model_call",
        "wrong_model",
        "stdout_exceeded",
        "leftover_process",
    }
    assert set(typing.get_args(shared_types.TerminationReason)) == documented


def test_termination_reason_names_stay_out_of_the_contract_all() -> None:
    import benchmax.envs

    for name in [*_REASON_CONSTANTS, "TerminationReason"]:
        assert name not in shared_types.__all__
        assert not hasattr(benchmax.envs, name)


def test_every_built_in_reason_settles_an_outcome_and_only_finished_is_no_failure() -> None:
    for reason in typing.get_args(shared_types.TerminationReason):
        outcome = RolloutOutcome(rewards={"r": 0.0}, termination_reason=reason)
        assert outcome.termination_reason == reason
        attempt = RolloutAttempt(rollout_id="r1", termination_reason=reason)
        assert attempt.termination_reason == reason
        if reason == shared_types.FINISHED:
            with pytest.raises(ValueError, match="cannot terminate as 'finished'"):
                RolloutFailure(reason, "boom")
        else:
            assert RolloutFailure(reason, "boom").termination_reason == reason


def test_reasons_stay_open_ended() -> None:
    assert "my_env_gave_up" not in typing.get_args(shared_types.TerminationReason)
    outcome = RolloutOutcome(rewards={"r": 0.0}, termination_reason="my_env_gave_up")
    assert outcome.termination_reason == "my_env_gave_up"
    assert RolloutFailure("my_env_gave_up", "m").termination_reason == "my_env_gave_up"


def test_setup_error_is_a_named_termination_reason() -> None:
    """beyond.md §9: rollout_context failing to set up has its own reason in the vocabulary."""
    from typing import get_args

    from benchmax.envs import shared_types

    assert shared_types.SETUP_ERROR == "setup_error"
    assert "setup_error" in get_args(shared_types.TerminationReason)
