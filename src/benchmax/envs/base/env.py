"""``BaseEnv``: a reusable OpenAI-compatible chat loop with optional function tools.

Each rollout is run by its own ``RolloutEngine`` (``_engine``), made with the settings read
once here and this environment's public hooks; it owns the rollout's transcript, meter and
counters. The engine's parts live in private modules below it, which never import this
one (they log on this module's logger): ``_rollout_start`` (settings and transcript),
``_rollout_context`` (entering and leaving ``rollout_context``), ``_tool_turns`` (listing,
opening and running tools), ``_scoring`` (``compute_reward``), ``_meter`` (what an
observing runner is told) and ``_rollout_hooks`` (what they need of an environment).
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, cast

from benchmax._hook_deadlines import deadline_for
from benchmax._modelhttp import finish_reason_table
from benchmax._rollout_limits import LIMIT_NAMES, Limits
from benchmax._sampling_args import validated_sampling_args
from benchmax.envs.base._engine import RolloutEngine
from benchmax.envs.base._rollout_start import Settings
from benchmax.envs.base._tool_turns import declares_tools
from benchmax.envs.base.dataset import JsonRow
from benchmax.envs.base.openai_types import Messages, Tool
from benchmax.envs.dataset import Dataset
from benchmax.envs.environment import Environment
from benchmax.envs.shared_types import (
    DatasetSplit,
    Example,
    RewardMap,
    RolloutAttempt,
    RolloutRequest,
)

if TYPE_CHECKING:  # imported on first use: aiohttp costs a quarter second to import
    from benchmax._modelhttp import PoolLease

__all__ = ["BaseEnv", "BaseRollout"]

logger = logging.getLogger(__name__)  # also the private modules beside this one log on it

_POOL_LEASE_ATTRIBUTE = "_benchmax_model_pool_lease"
_OTHER_SETTINGS = ("send_reasoning", "sampling_args", "record_tokens")
"""The constructor's other overriding settings (``tools`` is checked apart)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class BaseRollout(RolloutAttempt):
    """A finished ``BaseEnv`` rollout: its transcript and the example's other fields."""

    messages: Messages
    example_args: Mapping[str, Any]
    split: DatasetSplit = "train"


class BaseEnv(Environment[JsonRow, BaseRollout], ABC):
    """A reusable OpenAI-compatible chat loop with optional function tools.

    Example payloads are JSON objects whose reserved ``prompt_messages`` field
    opens the transcript; every other field reaches the reward hooks as
    ``example_args``. Subclasses declare ``reward_keys``, ``max_turns`` and
    ``create_dataset``, and usually ``compute_reward``; tools come from
    ``tools`` (``@tool`` functions, ``Toolset``s and tool providers such as
    ``MCPServer``, opened per rollout; see ``benchmax.tools``), or from
    hand-written ``list_tools`` and ``run_tool``.

    Beyond the 0.2 limits, ``model_timeout``, ``tool_timeout``,
    ``rollout_timeout`` and ``reward_timeout`` (seconds, or ``None`` for none)
    end a rollout with the reason of the same name, and ``model_retries``
    retries transient model failures (connection errors, timeouts, HTTP
    408/409/429/5xx) with backoff.

    Requests and replies (``beyond.md`` §7-8): ``sampling_args`` are extra body
    fields (``temperature``, ``max_tokens``, ...) sent after ``model``,
    ``messages`` and ``tools``; a request's own ``sampling_args`` win over them.
    ``finish_reasons`` extends or overrides the table mapping a reply's
    ``finish_reason`` to a termination reason (``{"eos": "finished", ...}``,
    case-insensitive). A reply's ``reasoning_content``/``reasoning`` fields are
    kept in the transcript (``BaseRollout.messages``, seen by the reward hooks
    and recorded by the runner) but sent back to the model only when
    ``send_reasoning`` is true.

    Exact tokens (issue 17): with ``record_tokens`` true (or a request's
    ``record_tokens``), every model call asks the server for its prompt token ids,
    completion token ids and logprobs (``logprobs`` and ``return_token_ids`` body
    fields, before ``sampling_args``, which may add to them) and records them per
    call; a reply without them ends the rollout with ``model_error`` naming what
    it lacked, so no rollout is recorded with tokens silently missing.

    Simulated users (issue 20): ``user_turn`` may answer an assistant turn that has no
    tool calls with the next user message (``benchmax.tools.SimulatedUser`` plays a user
    from a model endpoint); by default it ends the rollout, as before.
    """

    max_turns: int | None = None
    max_tool_calls: int | None = None
    model_timeout: float | None = None
    tool_timeout: float | None = None
    rollout_timeout: float | None = None
    model_retries: int = 0
    reward_timeout: float | None = None
    send_reasoning: bool = False
    sampling_args: Mapping[str, Any] = MappingProxyType({})
    finish_reasons: Mapping[str, str] = MappingProxyType({})
    record_tokens: bool = False
    tools: Sequence[Any] = ()

    def __init__(
        self,
        *,
        max_turns: int | None = None,
        max_tool_calls: int | None = None,
        model_timeout: float | None = None,
        tool_timeout: float | None = None,
        rollout_timeout: float | None = None,
        model_retries: int | None = None,
        reward_timeout: float | None = None,
        send_reasoning: bool | None = None,
        sampling_args: Mapping[str, Any] | None = None,
        record_tokens: bool | None = None,
        tools: Sequence[Any] | None = None,
    ) -> None:
        """Override class-level settings; a ``None`` argument keeps the class value.

        ``tools`` lists ``@tool`` functions (a plain typed function is made one),
        ``Toolset`` instances and tool providers (``MCPServer``).

        Raises ``ValueError`` (``TypeError`` for a wrongly typed ``send_reasoning``,
        ``record_tokens``, ``sampling_args``, ``finish_reasons`` or ``tools`` entry) naming
        the setting that is invalid.
        """
        arguments = dict(locals())  # the keyword arguments, by name
        super().__init__()
        if sampling_args is not None:  # a copy: later changes to the caller's dict don't leak
            arguments["sampling_args"] = validated_sampling_args(sampling_args)
        for name in (*LIMIT_NAMES, *_OTHER_SETTINGS):
            if arguments[name] is not None:
                setattr(self, name, arguments[name])
        if tools is not None:
            from benchmax.envs.base._tool_table import checked_entries

            self.tools = checked_entries(tools)
        self._validate_limits()

    def _validate_limits(self) -> tuple[Limits, dict[str, Any], Mapping[str, str]]:
        """Check every setting; return the limits, the sampling args and the finish_reason
        table."""
        limits = Limits.of(self)
        if not isinstance(self.send_reasoning, bool):
            raise TypeError("send_reasoning must be True or False")
        if not isinstance(self.record_tokens, bool):
            raise TypeError("record_tokens must be True or False")
        sampling_args = validated_sampling_args(self.sampling_args)
        return limits, sampling_args, finish_reason_table(self.finish_reasons)

    @abstractmethod
    async def create_dataset(
        self, split: DatasetSplit, base_dir: Path, *, max_examples: int | None = None
    ) -> Dataset[JsonRow]:
        """Return the split's examples; payloads must contain ``prompt_messages``."""

    async def list_tools(self) -> list[Tool]:
        """Tools advertised to the model (OpenAI function-tool dicts): those of ``tools``
        (outside a rollout, providers' sessions are opened and closed to list them)."""
        if not declares_tools(self.tools):
            return []
        from benchmax.envs.base._tool_table import listed_tools

        return cast(list[Tool], await listed_tools(self))

    async def run_tool(self, rollout_id: str, tool_name: str, **tool_args: Any) -> Any:
        """Run one advertised tool with the model's keyword arguments (by default, one
        of ``tools``, inside its rollout); ``ValueError("Unknown tool: ...")`` otherwise.

        An override may name its parameters (``run_tool(self, rollout_id, tool_name,
        city)``): arguments that do not bind to them are answered with a tool message and
        it is not called. A ``TypeError`` it raises saying ``unexpected keyword argument
        'x'``, for an ``x`` the model passed that the advertised schema does not declare,
        is answered the same way (the model's mistake); any other exception, a
        ``TypeError`` naming a declared argument included, is a bug (``tool_error``)."""
        if not declares_tools(self.tools):
            raise ValueError(f"Unknown tool: {tool_name}")
        from benchmax.envs.base._tool_table import run_declared_tool

        return await run_declared_tool(rollout_id, tool_name, tool_args)

    async def user_turn(
        self,
        rollout_id: str,
        messages: Sequence[Mapping[str, Any]],
        example: Example[JsonRow],
    ) -> str | None:
        """The user's next message after an assistant turn without tool calls, or ``None``
        to end the rollout (the default: the assistant's reply ends it, as in 0.2).

        ``messages`` is the transcript so far (a copy; its last message is that assistant
        reply; earlier simulated-user messages carry ``SIMULATED_USER_KEY``); ``example``
        is the rollout's example (its payload holds e.g. a persona and a goal). A returned
        string joins the transcript as ``{"role": "user", "content": ..., "simulated_user":
        true}`` (the marker key is not sent to the model) and the loop calls the model
        again; every model call counts against ``max_turns``, so a user who still has
        something to say when no turn is left ends the rollout as ``max_turns_exceeded``.
        Only replies that finished normally (termination reason ``finished``) are offered.

        A ``RolloutFailure`` settles the rollout with its reason; any other exception,
        or an empty message, settles it as ``simulated_user_error``; a result that is
        neither a string nor ``None`` is a contract error (``TypeError``).
        """
        return None

    async def compute_reward(self, rollout: BaseRollout) -> RewardMap | None:
        """Score one finished rollout; ``None`` leaves scoring to the group hook."""
        return None

    async def compute_group_rewards(
        self, rollouts: Sequence[BaseRollout]
    ) -> Mapping[str, RewardMap] | None:
        """Return per-rollout rewards that depend on the whole group, or ``None``."""
        return None

    @asynccontextmanager
    async def rollout_context(
        self, rollout_id: str, example: Example[JsonRow]
    ) -> AsyncIterator[None]:
        """Hold per-rollout resources (a sandbox, a scratch directory); nothing by default."""
        yield

    async def aclose(self) -> None:
        """Release this environment's pooled model connections on the running loop."""
        lease = vars(self).get(_POOL_LEASE_ATTRIBUTE)
        if lease is not None:
            await lease.aclose()

    def _model_pool(self) -> PoolLease:
        # Created lazily: subclasses may skip __init__, and instances are pickled.
        state = vars(self)
        lease: PoolLease | None = state.get(_POOL_LEASE_ATTRIBUTE)
        if lease is None:
            from benchmax._modelhttp import PoolLease

            lease = state.setdefault(_POOL_LEASE_ATTRIBUTE, PoolLease())
        return lease

    async def run_rollout(self, request: RolloutRequest[JsonRow]) -> BaseRollout:
        """Run the chat/tool loop for one request, then score it."""
        limits, sampling_args, finish_reasons = self._validate_limits()
        if limits.max_turns is None:
            raise ValueError(f"{type(self).__name__} must configure max_turns before rollout")
        settings = Settings(
            limits=limits,
            max_turns=limits.max_turns,
            tools=deadline_for("tools", limits.tool_timeout),
            setup=deadline_for("rollout_context"),
            user_turn=deadline_for("user_turn"),
            send_reasoning=self.send_reasoning,
            sampling_args=sampling_args,
            finish_reasons=finish_reasons,
            record_tokens=self.record_tokens or request.record_tokens,
        )
        engine = RolloutEngine(
            self, request, settings, model_pool=self._model_pool, rollout_type=BaseRollout
        )
        return await engine.run()
