"""``AgentEnv``: a rollout runs a program you did not write; its model calls are captured.

Each rollout gets a capture session (``benchmax.capture``) on an endpoint this
environment starts on the running event loop (one per loop, shared by the rollouts in
flight and stopped when the last one ends), its own working directory, and then runs
``run_agent``: by default ``command`` as a subprocess in its own session, with the
example's payload as JSON on stdin and ``OPENAI_BASE_URL``, ``OPENAI_API_KEY`` and
``OPENAI_MODEL`` in its environment. The captured calls become the rollout's
``model_calls`` (exact token ids and logprobs), and ``compute_reward`` reads what the
program did as ``rollout.agent``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import shutil
import sys
import tempfile
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from functools import partial
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, ClassVar

from benchmax._hook_deadlines import deadline_for
from benchmax._modelhttp import add_usage, reply_usage
from benchmax._observer import observing
from benchmax._rollout_limits import Limits
from benchmax._value_checks import is_int_at_least
from benchmax._vocabulary import (
    FINISHED,
    HARNESS_ERROR,
    LEFTOVER_PROCESS,
    NO_MODEL_CALL,
    ROLLOUT_TIMEOUT,
    SETUP_ERROR,
    STDOUT_EXCEEDED,
)
from benchmax.envs._hook_errors import hook_errors
from benchmax.envs.agent._program import run_program
from benchmax.envs.agent._program_files import program_command
from benchmax.envs.agent._types import (
    AgentEndpoint,
    AgentOutput,
    AgentRollout,
    AgentRun,
    AgentTask,
    example_args_of,
)
from benchmax.envs.base._meter import Meter
from benchmax.envs.base._rollout_context import entered, leaving
from benchmax.envs.base._scoring import score_rollout
from benchmax.envs.base.dataset import JsonRow
from benchmax.envs.base.env import BaseEnv
from benchmax.envs.shared_types import (
    RolloutFailure,
    RolloutRequest,
)
from benchmax.trajectory import ModelCall, recording_annotations

if TYPE_CHECKING:
    from benchmax.capture import CapturedCall, CaptureSession

__all__ = ["AgentEnv"]

logger = logging.getLogger("benchmax.agents")

INHERITED_VARIABLES = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "SYSTEMROOT", "VIRTUAL_ENV")
"""The environment variables a command inherits (everything else, credentials included,
stays behind); ``AgentEnv.program_env`` adds more."""


class AgentEnv(BaseEnv):
    """An environment whose rollout runs an agent program and captures its model calls.

    A subclass sets ``command`` (an argv sequence: any language, any program reading
    ``OPENAI_BASE_URL``/``OPENAI_API_KEY``/``OPENAI_MODEL``; the payload arrives as JSON on
    stdin; it runs in the rollout's own ``workdir``) or overrides ``async def
    run_agent(self, rollout, endpoint)``; declares ``reward_keys`` and
    ``create_dataset`` (payloads are any JSON); and scores in ``compute_reward(rollout)``
    from ``rollout.agent`` (``exit_code``, ``stdout``, ``stderr``, ``workdir``, ``calls``).

    Limits: ``max_turns`` bounds the model calls (``max_turns_exceeded``),
    ``max_sampled_tokens`` the tokens sampled over all calls (``output_exceeded``),
    ``rollout_timeout`` the wall time (``rollout_timeout``; default 600 s),
    ``max_stdout_bytes`` the program's stdout (``stdout_exceeded``); ``model_timeout``
    and ``model_retries`` apply to each upstream call. A program that exits non-zero or
    raises ends as ``harness_error``; one that never calls the model as
    ``no_model_call``; one that calls another model name as ``wrong_model``; one that
    leaves processes running as ``leftover_process``. Each of those settles with zero
    rewards; the run goes on. Its whole process session is killed on every outcome.
    """

    command: ClassVar[Sequence[str] | None] = None
    max_turns: int | None = 32
    rollout_timeout: float | None = 600.0
    record_tokens: bool = True
    max_sampled_tokens: int | None = None
    max_stdout_bytes: int = 1 << 20
    max_stderr_bytes: int = 1 << 16
    program_env: Mapping[str, str] = MappingProxyType({})
    keep_workdirs: bool = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Project files named in ``command`` travel with the class when it is pickled by
        value (a bundle): see ``ProgramFile``."""
        super().__init_subclass__(**kwargs)
        command = cls.__dict__.get("command")
        if (
            command is not None
            and not isinstance(command, str | bytes)
            and isinstance(command, Sequence)
            and all(isinstance(part, str) for part in command)
        ):
            cls.command = program_command(command, cls.__module__)

    def _validate_limits(self) -> tuple[Limits, dict[str, Any], Mapping[str, str]]:
        """``BaseEnv``'s checks, then the program settings (``TypeError``/``ValueError``
        naming the attribute)."""
        checked = super()._validate_limits()
        command: object = self.command
        if command is not None and (
            isinstance(command, str | bytes)
            or not isinstance(command, Sequence)
            or not all(isinstance(part, str) for part in command)
        ):
            raise TypeError(
                "command must be a sequence of arguments (strings) such as"
                f" ('{{python}}', 'agent.py'), not {command!r}"
            )
        if not is_int_at_least(self.max_stdout_bytes, 1):
            raise ValueError("max_stdout_bytes must be a positive integer")
        if not is_int_at_least(self.max_stderr_bytes, 0):
            raise ValueError("max_stderr_bytes must be a non-negative integer")
        if self.max_sampled_tokens is not None and not is_int_at_least(self.max_sampled_tokens, 1):
            raise ValueError("max_sampled_tokens must be a positive integer or None")
        variables: object = self.program_env
        if not isinstance(variables, Mapping) or not all(
            isinstance(name, str) and isinstance(value, str) for name, value in variables.items()
        ):
            raise TypeError("program_env must map names to strings")
        if not isinstance(self.keep_workdirs, bool):
            raise TypeError("keep_workdirs must be True or False")
        return checked

    async def run_agent(self, rollout: AgentTask, endpoint: AgentEndpoint) -> AgentOutput | None:
        """Run the program for one rollout; by default ``command`` as a subprocess.

        An override calls the model at ``endpoint.base_url`` with ``endpoint.api_key``
        and ``endpoint.model`` (e.g. an ``openai.AsyncOpenAI`` client) and returns an
        ``AgentOutput`` (or ``None``: exit code 0, no output). A ``RolloutFailure`` it
        raises settles the rollout with its reason; any other exception is
        ``harness_error``.
        """
        if not self.command:
            raise TypeError(f"{type(self).__name__} must set command or override run_agent")
        variables = {name: value for name in INHERITED_VARIABLES if (value := os.environ.get(name))}
        variables.update(self.program_env)
        variables.update(endpoint.environment())
        payload = json.dumps(rollout.payload).encode()
        end = await run_program(
            [sys.executable if part == "{python}" else part for part in self.command],
            stdin=payload,
            env=variables,
            cwd=rollout.workdir,
            max_stdout=self.max_stdout_bytes,
            max_stderr=self.max_stderr_bytes,
            stop=endpoint.ended,
        )
        if end.flooded:
            raise RolloutFailure(
                STDOUT_EXCEEDED, f"the program wrote more than {self.max_stdout_bytes} bytes"
            )
        if end.left_processes:
            raise RolloutFailure(
                LEFTOVER_PROCESS, "the program exited leaving processes running (killed)"
            )
        return AgentOutput(exit_code=end.exit_code, stdout=end.stdout, stderr=end.stderr)

    async def run_rollout(self, request: RolloutRequest[JsonRow]) -> AgentRollout:
        """Run the program for one request inside ``rollout_context``, then score it."""
        limits, sampling_args, _ = self._validate_limits()
        if type(self).run_agent is AgentEnv.run_agent and not self.command:
            raise TypeError(f"{type(self).__name__} must set command or override run_agent")
        meter = Meter() if observing() else None
        recording: AbstractContextManager[dict[str, Any]] = (
            nullcontext({}) if meter is None else recording_annotations()
        )
        with recording as annotations:
            rollout, calls = await self._settled(request, limits, sampling_args, meter)
        if meter is not None:  # the calls were timed and counted by the capture session
            meter.model = sum(call.seconds for call in calls)
            meter.calls = list(_model_calls(calls, rollout.messages))
            meter.usage = _usage(calls)
            meter.report(request, rollout, rollout.messages, annotations)
        return rollout

    async def _settled(
        self,
        request: RolloutRequest[JsonRow],
        limits: Limits,
        sampling_args: Mapping[str, Any],
        meter: Meter | None,
    ) -> tuple[AgentRollout, tuple[CapturedCall, ...]]:
        workdir = Path(tempfile.mkdtemp(prefix="benchmax-agent-"))
        try:
            reason, output, calls = await self._captured(request, limits, sampling_args, workdir)
            run = AgentRun(
                exit_code=output.exit_code,
                stdout=output.stdout,
                stderr=output.stderr,
                workdir=workdir,
                calls=calls,
            )

            rollout = await score_rollout(
                self,
                request,
                limits.reward_timeout,
                reason,
                _transcript(calls),
                dict(example_args_of(request.example.payload)),
                meter,
                rollout_type=partial(AgentRollout, agent=run),
            )
            return rollout, calls
        finally:
            if not self.keep_workdirs:
                shutil.rmtree(workdir, ignore_errors=True)

    async def _captured(
        self,
        request: RolloutRequest[JsonRow],
        limits: Limits,
        sampling_args: Mapping[str, Any],
        workdir: Path,
    ) -> tuple[str, AgentOutput, tuple[CapturedCall, ...]]:
        """Run the program with a capture session of its own; the termination reason,
        what the program left and the calls captured."""
        from benchmax.capture import loop_endpoint

        async with loop_endpoint() as endpoint:
            session = endpoint.open_session(
                rollout_id=request.rollout_id,
                model=request.model,
                upstream_url=request.base_url,
                upstream_auth=request.model_auth,
                timeout=limits.model_timeout,
                retries=limits.model_retries,
                sampling_args={**sampling_args, **request.sampling_args},
                max_calls=limits.max_turns,
                max_sampled_tokens=self.max_sampled_tokens,
            )
            try:
                reason, output = await self._in_context(request, limits, session, workdir)
            finally:
                await endpoint.close_session(session)
        return reason, output, session.calls

    async def _in_context(
        self,
        request: RolloutRequest[JsonRow],
        limits: Limits,
        session: CaptureSession,
        workdir: Path,
    ) -> tuple[str, AgentOutput]:
        """Enter ``rollout_context``, run the program within ``rollout_timeout``; the
        termination reason and what the program left."""
        rollout_id = request.rollout_id
        nothing = AgentOutput(exit_code=None)
        setup = deadline_for("rollout_context")
        try:
            with hook_errors(self, "rollout_context"):
                context = self.rollout_context(rollout_id, request.example)
            if not await entered(self, context, rollout_id, setup):
                return SETUP_ERROR, nothing
        except RolloutFailure as failure:
            return failure.termination_reason, nothing
        endpoint = AgentEndpoint(
            base_url=session.base_url,
            api_key=session.api_key,
            model=request.model,
            ended=session.ended,
        )
        task = AgentTask(rollout_id=rollout_id, example=request.example, workdir=workdir)
        async with leaving(self, context, rollout_id, setup):
            reason, output = await self._program(task, endpoint, limits.rollout_timeout)
        captured = session.failure
        if captured is not None:  # the capture ended it first (or the program saw that)
            return captured.termination_reason, output
        if reason != FINISHED:
            return reason, output
        if output.exit_code != 0:
            logger.error(
                "agents.rollout.failed rollout_id=%s termination_reason=%s: the program"
                " exited with status %s; stderr: %s",
                rollout_id,
                HARNESS_ERROR,
                output.exit_code,
                output.stderr[-500:],
            )
            return HARNESS_ERROR, output
        if not session.calls:
            logger.error(
                "agents.rollout.failed rollout_id=%s termination_reason=%s: the program"
                " finished without calling the model",
                rollout_id,
                NO_MODEL_CALL,
            )
            return NO_MODEL_CALL, output
        return FINISHED, output

    async def _program(
        self, task: AgentTask, endpoint: AgentEndpoint, seconds: float | None
    ) -> tuple[str, AgentOutput]:
        """``run_agent`` within ``seconds``: ``finished`` (whatever its exit code) or the
        reason it failed with, and its output."""
        deadline = asyncio.timeout(seconds)
        try:
            async with deadline:
                with hook_errors(self, "run_agent"):
                    output = await self.run_agent(task, endpoint)
        except RolloutFailure as failure:
            logger.error(
                "agents.rollout.failed rollout_id=%s termination_reason=%s: %s",
                task.rollout_id,
                failure.termination_reason,
                failure,
            )
            return failure.termination_reason, AgentOutput(exit_code=None)
        except Exception as error:
            if isinstance(error, TimeoutError) and deadline.expired():
                logger.error(
                    "agents.rollout.failed rollout_id=%s termination_reason=%s: the program"
                    " ran past rollout_timeout of %gs (killed)",
                    task.rollout_id,
                    ROLLOUT_TIMEOUT,
                    seconds,
                )
                return ROLLOUT_TIMEOUT, AgentOutput(exit_code=None)
            logger.error(
                "agents.rollout.failed rollout_id=%s termination_reason=%s: %s",
                task.rollout_id,
                HARNESS_ERROR,
                error,
                exc_info=error,
            )
            return HARNESS_ERROR, AgentOutput(exit_code=None)
        if output is None:
            return FINISHED, AgentOutput()
        returned: object = output  # user code may return anything
        if not isinstance(returned, AgentOutput):
            with hook_errors(self, "run_agent"):
                raise TypeError(
                    f"run_agent must return an AgentOutput or None, not {type(output).__name__}"
                )
        return FINISHED, output


def _transcript(calls: tuple[CapturedCall, ...]) -> list[dict[str, Any]]:
    """The last call's messages and its reply (what the program's conversation ended as)."""
    if not calls:
        return []
    last = calls[-1]
    messages = last.request.get("messages")
    transcript = [dict(m) for m in messages if isinstance(m, Mapping)] if messages else []
    transcript.append(dict(last.message))
    return transcript


def _model_calls(calls: tuple[CapturedCall, ...], messages: Sequence[Any]) -> tuple[ModelCall, ...]:
    last = len(calls) - 1
    return tuple(
        call.model_call(len(messages) - 1 if index == last and messages else None)
        for index, call in enumerate(calls)
    )


def _usage(calls: tuple[CapturedCall, ...]) -> dict[str, int] | None:
    total: dict[str, int] | None = None
    for call in calls:
        total = add_usage(total, reply_usage(call.reply))
    return total
