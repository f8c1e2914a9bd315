"""No secret (sandbox tokens, bearer keys, agent/verifier env values) leaks anywhere visible."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import Any

import pytest
from harbor.models.environment_type import EnvironmentType
from harbor.models.trial.config import AgentConfig, EnvironmentConfig, TaskConfig, VerifierConfig
from tests.envs.harbor.conftest import BEARER_TOKEN, ScriptedTrials, make_request, result
from tests.envs.harbor.harbor_fakes import AGENT_IMPORT_PATH

from benchmax.envs.harbor import (
    BundledAgentSource,
    BundledHarborAgent,
    CustomSandboxCredentials,
    DaytonaCredentials,
    HarborEnv,
    HarborTrialTemplate,
    ModalCredentials,
)
from benchmax.envs.harbor.credentials import sandbox_credentials_scope

SECRETS = (
    BEARER_TOKEN,
    "modal-id-SECRET-1",
    "modal-token-SECRET-2",
    "daytona-api-SECRET-3",
    "daytona-jwt-SECRET-4",
    "daytona-org-SECRET-5",
    "custom-SECRET-6",
    "agent-env-SECRET-7",
    "judge-key-SECRET-8",
)


def _assert_clean(text: str) -> None:
    for secret in SECRETS:
        assert secret not in text, f"secret {secret!r} leaked into {text!r}"


def test_reprs_hide_every_secret() -> None:
    values: list[Any] = [
        ModalCredentials("modal-id-SECRET-1", "modal-token-SECRET-2"),
        DaytonaCredentials(api_key="daytona-api-SECRET-3", target="eu"),
        DaytonaCredentials(
            jwt_token="daytona-jwt-SECRET-4", organization_id="daytona-org-SECRET-5"
        ),
        CustomSandboxCredentials({"TOKEN": "custom-SECRET-6"}, provider="custom"),
        HarborTrialTemplate(
            AgentConfig(name="nop", env={"OPENAI_API_KEY": "agent-env-SECRET-7"}),
            EnvironmentConfig(),
            VerifierConfig(env={"JUDGE_KEY": "judge-key-SECRET-8"}),
        ),
        BundledHarborAgent(
            AgentConfig(import_path="agent:A", env={"KEY": "agent-env-SECRET-7"}),
            BundledAgentSource.from_files({"agent.py": b"custom-SECRET-6"}),
        ),
        make_request("r", None),
    ]
    for value in values:
        _assert_clean(repr(value))
        _assert_clean(str(value))


def test_validation_errors_name_variables_not_values() -> None:
    with pytest.raises(ValueError) as caught:
        CustomSandboxCredentials({"TOKEN": "custom-SECRET-6", "EMPTY": ""})
    assert "'EMPTY'" in str(caught.value)
    _assert_clean(str(caught.value))


async def test_logs_and_errors_of_a_run_contain_no_secrets(
    make_env: Callable[..., HarborEnv],
    make_template: Callable[..., HarborTrialTemplate],
    task_payload: TaskConfig,
    scripted_trials: ScriptedTrials,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    caplog.set_level(logging.DEBUG)
    monkeypatch.delenv("TOKEN", raising=False)
    credentials = CustomSandboxCredentials({"TOKEN": "custom-SECRET-6"})
    template = make_template(
        agent=AgentConfig(import_path=AGENT_IMPORT_PATH, env={"AGENT_KEY": "agent-env-SECRET-7"}),
        verifier=VerifierConfig(env={"JUDGE_KEY": "judge-key-SECRET-8"}),
    )
    env = make_env(trial=template, sandbox_credentials=credentials)
    scripted_trials.outcomes["raised"] = RuntimeError("sandbox exploded")
    scripted_trials.outcomes["returned"] = result(exception=("AgentTimeoutError", "slow"))
    scripted_trials.outcomes["empty"] = result()
    requests = [make_request(name, task_payload) for name in ("ok", "raised", "returned", "empty")]
    await env.run_group(requests)
    # The secrets did reach the trial configs (where Harbor needs them) ...
    assert scripted_trials.configs[0].agent.env["OPENAI_API_KEY"] == BEARER_TOKEN
    # ... but not any log record, message or traceback.
    assert caplog.records
    for record in caplog.records:
        _assert_clean(record.getMessage())
    _assert_clean(caplog.text)
    _assert_clean(repr(env))
    assert "TOKEN" not in os.environ

    with pytest.raises(RuntimeError) as nested:
        async with sandbox_credentials_scope(credentials):
            async with sandbox_credentials_scope(
                ModalCredentials("modal-id-SECRET-1", "modal-token-SECRET-2")
            ):
                pass
    _assert_clean(str(nested.value))


def test_construction_errors_contain_no_secrets(
    make_env: Callable[..., HarborEnv], make_template: Callable[..., HarborTrialTemplate]
) -> None:
    modal = make_template(environment=EnvironmentConfig(type=EnvironmentType.MODAL))
    errors: list[Exception] = []
    for kwargs in (
        {"trial": modal},
        {
            "trial": make_template(environment=EnvironmentConfig(type=EnvironmentType.DOCKER)),
            "sandbox_credentials": ModalCredentials("modal-id-SECRET-1", "modal-token-SECRET-2"),
        },
        {"sandbox_credentials": "modal-id-SECRET-1"},
    ):
        with pytest.raises((TypeError, ValueError)) as caught:
            make_env(**kwargs)
        errors.append(caught.value)
    for error in errors:
        _assert_clean(str(error))


@pytest.mark.usefixtures("harbor_recorder")
@pytest.mark.filterwarnings("ignore:Task.checksum:DeprecationWarning")
async def test_real_trial_logs_contain_no_secrets(
    make_env: Callable[..., HarborEnv],
    make_template: Callable[..., HarborTrialTemplate],
    task_payload: TaskConfig,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Harbor's own records (at DEBUG) during a real trial also stay clean."""
    caplog.set_level(logging.DEBUG)
    template = make_template(
        agent=AgentConfig(import_path=AGENT_IMPORT_PATH, env={"AGENT_KEY": "agent-env-SECRET-7"}),
        verifier=VerifierConfig(env={"JUDGE_KEY": "judge-key-SECRET-8"}),
    )
    env = make_env(
        trial=template, sandbox_credentials=CustomSandboxCredentials({"TOKEN": "custom-SECRET-6"})
    )
    outcomes = await env.run_group([make_request("real", task_payload)])
    assert outcomes["real"].termination_reason == "finished"
    _assert_clean(caplog.text)
    trial_dir = template.trials_dir / "real"
    for name in ("config.json", "result.json", "trial.log"):
        if (trial_dir / name).exists():
            _assert_clean((trial_dir / name).read_text())
