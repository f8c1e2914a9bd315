"""``validate_environment``: a good env passes; each check fails on an env broken its way."""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path
from typing import Any

import pytest
from tests.validation import envs
from tests.validation.conftest import ROWS, write_rows

from benchmax.bundle import _benchmax_version
from benchmax.testing import RecordedRequest, message_text
from benchmax.validation import (
    CheckResult,
    ValidationConfig,
    ValidationReport,
    validate_environment,
)


def knows_the_answer(body: dict[str, Any], request: RecordedRequest) -> str:
    """Right on the first rollout of each group, wrong on the others: rewards vary."""
    question = message_text(body["messages"][-1]["content"])
    truth = next(row["ground_truth"] for row in ROWS if row["prompt"] == question)
    return f"It is {truth}." if request.session.endswith(".r0") else "I do not know."


async def validate(env_class: Any, data: Path, **options: Any) -> ValidationReport:
    """Validate; the fresh interpreter (seconds each) only runs where a test asks for it."""
    options.setdefault("fresh_interpreter", False)
    config = ValidationConfig(
        base_dir=data, policy=options.pop("policy", knows_the_answer), **options
    )
    return await validate_environment(env_class, config)


def status(report: ValidationReport, name: str) -> str:
    return report.check(name).status


def detail(report: ValidationReport, name: str) -> str:
    return report.check(name).detail


async def test_a_good_environment_passes_every_check(data: Path) -> None:
    report = await validate(envs.GoodEnv, data, fresh_interpreter=True)
    assert report.ok, report.to_json()
    assert report.failed() == ()
    assert status(report, "dataset train") == "skipped"  # only eval.jsonl exists
    assert "no train data" in detail(report, "dataset train")
    for name in (
        "environment class", "constructor", "reward_keys", "dataset eval: loads",
        "dataset eval: ids unique", "dataset eval: ids stable", "dataset eval: payloads JSON",
        "dataset eval: prompt_messages", "tools", "rollouts", "reward variance", "bundle: dump",
        "bundle: file round trip", "bundle: compatibility", "bundle: fresh interpreter",
        "bundle: size", "dependencies",
    ):  # fmt: skip
        assert status(report, name) == "passed", (name, report.check(name))
    assert "3 examples" in detail(report, "dataset eval: loads")
    assert "2 examples x 2 rollouts" in detail(report, "rollouts")
    assert "GoodEnv loaded in a fresh interpreter" in detail(report, "bundle: fresh interpreter")
    assert "tests.validation.envs" in detail(report, "bundle: dump")  # captured by value


async def test_both_splits_are_checked_when_present(data: Path) -> None:
    write_rows(data / "train.jsonl", ROWS[:2])
    report = await validate(envs.GoodEnv, data)
    assert report.ok
    assert "2 examples" in detail(report, "dataset train: loads")
    assert "3 examples" in detail(report, "dataset eval: loads")


async def test_the_report_serializes_for_ci(data: Path) -> None:
    report = await validate(envs.NoRewardKeysEnv, data)
    payload = report.to_json()
    assert payload["ok"] is False
    assert payload["counts"]["failed"] >= 1
    assert {"name": "reward_keys", "status": "failed"}.items() <= payload["checks"][2].items()


async def test_a_class_that_is_not_an_environment_fails(data: Path) -> None:
    report = await validate(envs.NotAnEnv, data)
    assert not report.ok
    assert [c.name for c in report.checks] == ["environment class"]
    assert "subclass benchmax.envs.BaseEnv" in detail(report, "environment class")


async def test_an_abstract_environment_fails_naming_what_is_missing(data: Path) -> None:
    report = await validate(envs.AbstractEnv, data)
    assert "create_dataset" in detail(report, "environment class")


async def test_missing_constructor_arguments_fail_with_advice(data: Path) -> None:
    report = await validate(envs.NeedsArgumentEnv, data)
    assert status(report, "constructor") == "failed"
    assert "level" in detail(report, "constructor")
    assert "--env-arg" in detail(report, "constructor")
    ok = await validate(envs.NeedsArgumentEnv, data, constructor_args={"level": 2})
    assert ok.ok, ok.failed()


async def test_unknown_constructor_arguments_fail(data: Path) -> None:
    report = await validate(envs.GoodEnv, data, constructor_args={"temperature": 1})
    assert status(report, "constructor") == "failed"
    assert "temperature" in detail(report, "constructor")


async def test_a_raising_constructor_fails_with_its_error(data: Path) -> None:
    report = await validate(envs.FailingConstructorEnv, data)
    assert "RuntimeError: cannot find the grader config" in detail(report, "constructor")
    assert status(report, "datasets") == "skipped"


@pytest.mark.parametrize(
    ("env_class", "problem"),
    [(envs.NoRewardKeysEnv, "empty"), (envs.RepeatedRewardKeysEnv, "repeats")],
)
async def test_reward_keys_must_be_declared(env_class: Any, problem: str, data: Path) -> None:
    report = await validate(env_class, data)
    assert status(report, "reward_keys") == "failed"
    assert problem in detail(report, "reward_keys")
    assert "reward_keys = ('correct',)" in detail(report, "reward_keys")
    assert status(report, "rollouts") == "skipped"


async def test_no_data_at_all_fails(tmp_path: Path) -> None:
    report = await validate(envs.GoodEnv, tmp_path)
    assert status(report, "datasets") == "failed"
    assert "neither train nor eval" in detail(report, "datasets")
    assert status(report, "bundle: fresh interpreter") == "skipped"


async def test_a_malformed_data_file_fails_naming_file_and_line(data: Path) -> None:
    (data / "eval.jsonl").write_text('{"prompt": "a", "ground_truth": "b"}\n{"prompt": 1}\n')
    report = await validate(envs.GoodEnv, data)
    assert status(report, "dataset eval: loads") == "failed"
    assert "eval.jsonl:2" in detail(report, "dataset eval: loads")
    assert "KeyError" in detail(report, "dataset eval: loads")


async def test_an_empty_split_fails(data: Path) -> None:
    (data / "eval.jsonl").write_text("\n")
    report = await validate(envs.GoodEnv, data)
    assert status(report, "dataset eval: loads") == "failed"
    assert "empty" in detail(report, "dataset eval: loads")


async def test_repeated_ids_fail(data: Path) -> None:
    report = await validate(envs.ConstantIdEnv, data)
    assert status(report, "dataset eval: ids unique") == "failed"
    assert "canonical_example_id" in detail(report, "dataset eval: ids unique")


async def test_ids_that_change_between_loads_fail(data: Path) -> None:
    report = await validate(envs.RandomIdEnv, data)
    assert status(report, "dataset eval: ids unique") == "passed"
    assert status(report, "dataset eval: ids stable") == "failed"
    assert "differs from example 0" in detail(report, "dataset eval: ids stable")


async def test_payloads_must_be_json(data: Path) -> None:
    report = await validate(envs.NotJsonPayloadEnv, data)
    assert status(report, "dataset eval: payloads JSON") == "failed"
    assert "3 payloads" in detail(report, "dataset eval: payloads JSON")


@pytest.mark.parametrize(
    ("env_class", "problem"),
    [
        (envs.BadRoleEnv, "prompt_messages[0].role is 'human'"),
        (envs.BadContentEnv, "prompt_messages[0].content[0] is a text part without"),
    ],
)
async def test_prompt_messages_must_be_chat_messages(
    env_class: Any, problem: str, data: Path
) -> None:
    report = await validate(env_class, data)
    assert status(report, "dataset eval: prompt_messages") == "failed"
    assert problem in detail(report, "dataset eval: prompt_messages")


@pytest.mark.parametrize(
    ("env_class", "problem"),
    [
        (envs.BadToolSchemaEnv, "not a valid JSON Schema at properties/q/type"),
        (envs.BadToolNameEnv, "'web search' must be 1-64 letters"),
        # Not JSON's object (jsonschema called it "not of type 'object'" at the root).
        (envs.ReadOnlyToolSchemaEnv, "parameters is a mappingproxy; use a JSON Schema object"),
    ],
)
async def test_tools_must_be_openai_function_schemas(
    env_class: Any, problem: str, data: Path
) -> None:
    report = await validate(env_class, data)
    assert status(report, "tools") == "failed"
    assert problem in detail(report, "tools")


async def test_a_contract_error_fails_the_rollouts(data: Path) -> None:
    report = await validate(envs.NoMaxTurnsEnv, data)
    assert status(report, "rollouts") == "failed"
    assert "contract error" in detail(report, "rollouts")
    assert "must configure max_turns" in detail(report, "rollouts")


async def test_rewards_outside_the_declared_keys_fail_the_rollouts(data: Path) -> None:
    report = await validate(envs.WrongRewardKeyEnv, data)
    assert status(report, "rollouts") == "failed"
    assert "missing=['correct'], unknown=['accuracy']" in detail(report, "rollouts")


async def test_rollouts_that_all_fail_operationally_fail_with_the_logged_reason(
    data: Path,
) -> None:
    report = await validate(envs.RaisingRewardEnv, data)
    assert status(report, "rollouts") == "failed"
    assert "4 reward_error" in detail(report, "rollouts")
    assert "answer_key" in detail(report, "rollouts")


async def test_an_unreachable_endpoint_fails_the_rollouts(data: Path) -> None:
    report = await validate(
        envs.GoodEnv,
        data,
        policy=None,
        base_url="http://127.0.0.1:9/v1",
        model="m",
        fresh_interpreter=True,
    )
    assert status(report, "rollouts") == "failed"
    assert "model_error" in detail(report, "rollouts")
    # the bundle still runs against the embedded mock
    assert status(report, "bundle: fresh interpreter") == "passed"


async def test_flat_groups_are_a_warning_not_a_failure(data: Path) -> None:
    report = await validate(envs.GoodEnv, data, policy=None)  # echo: always wrong
    assert report.ok
    assert status(report, "reward variance") == "warning"
    assert "no learning signal" in detail(report, "reward variance")
    assert "--mock-policy" in detail(report, "reward variance")


async def test_an_unpicklable_constructor_argument_fails_the_dump(data: Path) -> None:
    report = await validate(envs.UnpicklableArgumentEnv, data, constructor_args={"lock": envs.LOCK})
    assert status(report, "constructor") == "passed"
    assert status(report, "bundle: dump") == "failed"
    assert "lock" in detail(report, "bundle: dump").lower()


async def test_a_bundle_bound_to_the_calling_process_fails_in_a_fresh_interpreter(
    data: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    registry = types.ModuleType(envs.REGISTRY)
    registry.ROWS = ROWS  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, envs.REGISTRY, registry)
    report = await validate(envs.ProcessBoundEnv, data, fresh_interpreter=True)
    assert status(report, "rollouts") == "passed"  # fine in this process
    assert status(report, "bundle: fresh interpreter") == "failed"
    assert envs.REGISTRY in detail(report, "bundle: fresh interpreter")
    assert "python -I" in detail(report, "bundle: fresh interpreter")


async def test_an_incompatible_bundle_fails(data: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    versions = iter(["0.9.0"])  # the dump records 0.9.0; the runtime then reports its own

    def version() -> str:
        return next(versions, _benchmax_version())

    monkeypatch.setattr("benchmax.bundle._benchmax_version", version)
    report = await validate(envs.GoodEnv, data)
    assert status(report, "bundle: compatibility") == "failed"
    assert "0.9" in detail(report, "bundle: compatibility")


async def test_a_large_bundle_is_a_warning(data: Path) -> None:
    report = await validate(envs.GoodEnv, data, bundle_size_warning=100)
    assert report.ok
    assert status(report, "bundle: size") == "warning"
    assert "constructor arguments" in detail(report, "bundle: size")


async def test_undeclared_third_party_imports_are_a_warning(data: Path) -> None:
    from tests.validation.undeclared_env import UndeclaredImportEnv

    report = await validate(UndeclaredImportEnv, data)
    assert report.ok
    assert status(report, "dependencies") == "warning"
    assert "tests.validation.undeclared_env imports hypothesis" in detail(report, "dependencies")
    assert "--pip-dependency 'hypothesis>=" in detail(report, "dependencies")
    declared = await validate(UndeclaredImportEnv, data, pip_dependencies=["hypothesis"])
    assert status(declared, "dependencies") == "passed"


def test_config_validates_its_fields() -> None:
    with pytest.raises(ValueError, match="examples"):
        ValidationConfig(examples=0)
    with pytest.raises(ValueError, match="group_size"):
        ValidationConfig(group_size=0)
    with pytest.raises(ValueError, match="dependenc"):
        ValidationConfig(pip_dependencies=["not a requirement ???"])
    with pytest.raises(TypeError, match="local_modules"):
        ValidationConfig(local_modules=["envs"])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="rollout_timeout"):
        ValidationConfig(rollout_timeout=0)
    with pytest.raises(ValueError, match="status"):
        CheckResult("x", "fine")  # type: ignore[arg-type]


async def test_credentials_never_appear_in_the_report(data: Path) -> None:
    from benchmax.auth import StaticBearerAuth

    report = await validate(
        envs.GoodEnv,
        data,
        policy=None,
        base_url="http://user:url-password@127.0.0.1:9/v1",
        model="m",
        model_auth=StaticBearerAuth("sk-validate-secret"),
    )
    text = json.dumps(report.to_json())
    assert "url-password" not in text and "sk-validate-secret" not in text
    assert "http://user:***@127.0.0.1:9/v1" in detail(report, "rollouts")


class WrongKeysWithToolEnv(envs.GoodEnv):
    """Declares ``correct`` but returns ``accuracy``; its ``lookup`` tool always raises."""

    max_turns = 2

    async def list_tools(self) -> list[Any]:
        return [{"type": "function", "function": {"name": "lookup", "parameters": {}}}]

    async def run_tool(self, rollout_id: str, tool_name: str, **tool_args: Any) -> Any:
        raise LookupError("the index is offline")

    async def compute_reward(self, rollout: Any) -> dict[str, float]:
        return {"accuracy": 1.0}


def tool_on_r0(body: dict[str, Any], request: RecordedRequest) -> Any:
    """Rollout r0 calls the (failing) tool; the others answer at once."""
    if request.session.endswith(".r0"):
        return {"content": None, "tool_calls": [{"name": "lookup", "arguments": "{}"}]}
    return "It is 4."


async def test_validate_names_a_reward_shape_mismatch_as_such(data: Path) -> None:
    """Issue 19 kind 7: not the first error logged (a tool failing in a sibling)."""
    report = await validate(WrongKeysWithToolEnv, data, policy=tool_on_r0)
    assert status(report, "rollouts") == "failed"
    shown = detail(report, "rollouts")
    assert shown.startswith("reward shape mismatch:"), shown
    assert "reward_keys ['correct']" in shown and "unknown=['accuracy']" in shown
    assert "tool_failed" not in shown
