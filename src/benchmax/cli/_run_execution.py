"""Carrying out a ``benchmax run`` plan: the endpoint (a real one, or the embedded mock
model), the environment constructed for it with the run's limits and credentials, the run
with its progress bar, and what an interruption left saved."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from benchmax._rollout_limits import apply_limits
from benchmax._secret_masking import mask_secrets
from benchmax.auth import ModelAuth, StaticBearerAuth
from benchmax.cli._credentials import MOCK_KEY, injected_auth_names
from benchmax.cli._render import progress_bar
from benchmax.cli._run_plan import Plan
from benchmax.cli._targets import (
    TargetError,
    substitute_mock,
)
from benchmax.envs import BaseEnv
from benchmax.envs.environment import Environment
from benchmax.results import read_results_summary
from benchmax.runner import Progress, RunError, RunReport, run_environment

__all__ = ["DEFAULT_MODEL_RETRIES", "execute", "masked", "report_interruption"]


@dataclass(frozen=True, slots=True)
class Endpoint:
    """Where the policy model and the ``@mock`` arguments point for this run."""

    base_url: str
    mock_url: str | None


@contextlib.asynccontextmanager
async def _endpoint(
    base_url: str | None, policy: Any, *, tokens: bool = False
) -> AsyncIterator[Endpoint]:
    if base_url is not None:
        yield Endpoint(base_url=base_url, mock_url=None)
        return
    from benchmax.testing import MockModelServer

    async with MockModelServer(policy, record=False, tokens=tokens) as server:
        yield Endpoint(
            base_url=f"{server.origin}/sessions/{{rollout_id}}/v1", mock_url=server.base_url
        )


def _constructor_args(plan: Plan, endpoint: Endpoint) -> dict[str, Any]:
    """The arguments the environment is constructed with (``@mock`` replaced)."""
    args = {**plan.target.constructor_args, **plan.env_args}
    if endpoint.mock_url is not None:
        args = substitute_mock(args, endpoint.mock_url)
    return args


def _prepare(plan: Plan, endpoint: Endpoint) -> tuple[Environment[Any, Any], dict[str, Any]]:
    """Construct the environment for this endpoint and apply the run's limits to it (the
    given ones, and ``DEFAULT_MODEL_RETRIES`` where it applies); returns both."""
    args = _constructor_args(plan, endpoint)
    env = plan.target.construct(args)
    for name in plan.limits:
        if not hasattr(env, name):
            option = "--" + name.replace("_", "-")
            raise TargetError(f"{option} applies to BaseEnv environments only")
    limits = dict(plan.limits)
    if "model_retries" not in limits and "model_retries" not in args and _leaves_retries(env):
        limits["model_retries"] = DEFAULT_MODEL_RETRIES
    apply_limits(env, limits)
    return env, limits


DEFAULT_MODEL_RETRIES = 3
"""The model-call retries ``benchmax run`` gives a ``BaseEnv`` that leaves
``model_retries`` at BaseEnv's 0 (no ``--model-retries``, no constructor argument, no
class attribute of its own): each failed call is tried at most 3 more times, waiting with
backoff (0.5 s doubling, capped at 30 s, jittered) or what a 429's ``Retry-After`` asks
(capped at 60 s)."""


def _leaves_retries(env: Environment[Any, Any]) -> bool:
    """Whether ``env`` is a ``BaseEnv`` whose ``model_retries`` is BaseEnv's own default."""
    if not isinstance(env, BaseEnv) or "model_retries" in vars(env):
        return False
    owner = next(k for k in type(env).__mro__ if "model_retries" in vars(k))
    return owner is BaseEnv


def _providers(
    plan: Plan, endpoint: Endpoint, env: Environment[Any, Any], console: Console
) -> dict[str, ModelAuth]:
    providers = dict(plan.config.auth_providers)
    injected = injected_auth_names(env)
    if endpoint.mock_url is not None:
        for name in plan.auth_names | injected:
            providers[name] = StaticBearerAuth(MOCK_KEY)
    elif missing := sorted(injected - set(providers)):
        console.print(
            f"[yellow]note:[/] no --auth given for injected credential(s) "
            f"{escape(', '.join(missing))}; calls using them will fail",
            soft_wrap=True,
        )
    return providers


async def execute(plan: Plan, console: Console) -> RunReport:
    # An environment that always records tokens (AgentEnv) gets a mock that can give them.
    tokens = plan.config.tokens or getattr(plan.target.env_class, "record_tokens", False) is True
    async with _endpoint(plan.base_url, plan.policy, tokens=tokens) as endpoint:
        env, limits = _prepare(plan, endpoint)
        try:
            config = dataclasses.replace(
                plan.config,
                base_url=endpoint.base_url,
                auth_providers=_providers(plan, endpoint, env, console),
            )
            bar, update = progress_bar(console)
            started: list[bool] = []

            def on_progress(progress: Progress) -> None:
                if not started:  # the run is under way: the results file was accepted
                    started.append(True)
                    if endpoint.mock_url is not None:
                        console.print(
                            "[bold yellow]mock model:[/] no --base-url given, so the embedded "
                            f"mock model server answers (policy {escape(plan.mock_policy)}); "
                            "pass --base-url to use a real model",
                            soft_wrap=True,
                        )
                    if plan.ray is not None:
                        console.print(
                            f"[bold]ray:[/] groups run on Ray workers "
                            f"({escape(plan.ray.where)}); starting them...",
                            soft_wrap=True,
                        )
                        if endpoint.mock_url is not None and not plan.ray.starts_local:
                            console.print(
                                "[yellow]note:[/] the embedded mock model listens on "
                                "127.0.0.1 here: workers on other machines cannot reach it",
                                soft_wrap=True,
                            )
                    bar.start()  # only now: a run refused before it starts prints no bar
                update(progress)

            executor = None
            if plan.ray is not None:
                executor = dataclasses.replace(
                    plan.ray,
                    constructor_args=_constructor_args(plan, endpoint),
                    env_attributes=limits,
                )
            try:
                return await run_environment(
                    env, config, on_progress=on_progress, executor=executor
                )
            finally:
                if started:
                    bar.stop()
        finally:
            await env.aclose()


def masked(text: str, plan: Plan) -> str:
    """``text`` with every credential of the run replaced by ``***``."""
    return mask_secrets(text, plan.config.secrets())


def report_interruption(console: Console, output: Path) -> None:
    if not output.exists():
        console.print("[bold red]interrupted[/] before the run started; nothing was saved")
        return
    try:
        saved = len({r.example_index for r in read_results_summary(output).rollouts})
    except (OSError, RunError):
        saved = 0
    console.print(
        f"[bold red]interrupted:[/] {saved} complete group(s) saved in {escape(str(output))}; "
        f"run the same command with -o {escape(str(output))} to resume",
        soft_wrap=True,
    )
