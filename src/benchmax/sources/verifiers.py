"""A verifiers environment run by benchmax's runtime: ``VerifiersEnv(env_id, env_args)``.

verifiers 0.4 (``pip install 'benchmax[verifiers]'``) environments are installed packages
exporting a ``vf.Taskset`` (the "taskset id" is the package name, ``-`` or ``_``).
``VerifiersEnv`` loads one through verifiers' own ``resolve_env_config`` and
``load_environment`` (``env_args`` are the taskset config's fields, validated by it) and
runs its tasks with benchmax's chat/tool loop in place of a verifiers harness::

    uv run benchmax run benchmax.sources.verifiers:VerifiersEnv \\
        --env-arg env_id=my-env --env-arg env_args='{"num_tasks": 8}'

What is supported (verifiers 0.4, ``verifiers.v1``):

* Dataset: the taskset's tasks in ``load()`` order (``idx``), both splits, unless
  ``eval_env_args`` (merged over ``env_args``) loads another taskset for eval. An
  example's id is the canonical id of the taskset's module name (``my-env`` and
  ``my_env`` are one) and the task's ``key`` (verifiers' stable task identity: its
  content hash, or a durable id the task defines), so ids do not change between runs;
  keys must be unique. An infinite taskset needs
  ``--max-examples``. The payload carries the task's data as JSON; each rollout rebuilds
  the task from it with the taskset's task config.
* Prompt: ``system_prompt`` as a system message, then ``prompt`` (a string as the user
  message, or its messages).
* Rewards: every ``@vf.reward`` (and config-plugged reward) is a reward key holding its
  raw score, weighted by its ``weight`` in ``reward_weights``; every ``@vf.metric`` is a
  key of weight 0 (recorded, not summed; a non-finite score of a weight-0 key is recorded
  as 0.0 with a warning, never ``reward_error``). So benchmax's scalar reward,
  ``sum(weight * score)``, is verifiers' ``trace.reward``. Scores come from verifiers'
  own ``Task.score`` on a ``vf.Trace`` of the rollout's transcript (one branch; the
  model's turns ``sampled``; assistant text without inline ``<think>`` reasoning, a
  server's ``reasoning_content`` kept), offline as ``vf-replay`` scores (no runtime).
* Tools: the ``@vf.tool`` methods of the task's ``toolsets`` (built per rollout, with
  ``setup()`` and ``setup_task(data)``) and of the taskset's ``toolsets`` (built once,
  ``setup()`` once) are the model's tools, named ``<server>_<tool>`` as verifiers'
  harnesses advertise them, run in this process; a tool's exception is a tool error the
  model sees. Multi-turn: tool calls over up to ``max_turns`` model calls (default 1
  without tools, 10 with).

Refused with a ``ValueError`` naming the part (at construction, or for a task without a
prompt when the dataset is made): multi-agent envs (``user-sim``, ``best-of-n``, ...), a
taskset that ships its own harness, tasks needing a container or overriding
``setup``/``finalize``/``stage_verifier``, plugged judges, ``@vf.stop`` and
``@vf.intercept`` hooks, rewards or metrics needing a ``runtime``, toolsets with shared
state (a ``vf.State`` subclass) or a remote ``url``, and tasks whose user speaks first
(no ``prompt``). A reward returning keyed scores (a mapping) settles the rollout as
``reward_error`` (benchmax declares its reward keys up front).
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Any, ClassVar, cast

from benchmax.envs import (
    BaseRollout,
    DatasetSplit,
    Example,
    JsonRow,
    RolloutFailure,
    Tool,
    canonical_example_id,
)
from benchmax.envs.shared_types import REWARD_ERROR
from benchmax.sources._arguments import checked_object
from benchmax.sources._base import SourceEnv
from benchmax.sources._verifiers_parts import (
    Loaded,
    loaded_environment,
    prompt_messages,
    scoring_trace,
    tool_functions,
)

__all__ = ["VerifiersEnv"]

logger = logging.getLogger(__name__)


class VerifiersEnv(SourceEnv):
    """An installed verifiers 0.4 environment (taskset id ``env_id``, config
    ``env_args``) run by benchmax; see the module docstring for what is supported."""

    max_turns: int | None = 1
    source_name = "VerifiersEnv"
    payload_key = "verifiers"
    # verifiers objects, made on first use, are rebuilt where the env runs
    process_local: ClassVar[tuple[str, ...]] = (
        "_vf_loaded",
        "_vf_rollout_tools",
        "_vf_shared_ready",
    )

    def __init__(
        self,
        env_id: str,
        env_args: Mapping[str, object] | None = None,
        *,
        eval_env_args: Mapping[str, object] | None = None,
        **settings: Any,
    ) -> None:
        if not isinstance(env_id, str) or not env_id.strip():
            raise TypeError(f"VerifiersEnv env_id must be a taskset id (a string), not {env_id!r}")
        self.env_id = env_id
        self.env_args = _checked_args("env_args", env_args)
        self.eval_env_args = (
            None if eval_env_args is None else _checked_args("eval_env_args", eval_env_args)
        )
        loaded = self._loaded("train")
        self._reward_keys = (*loaded.rewards, *loaded.metrics)
        self.reward_weights = {**loaded.rewards, **dict.fromkeys(loaded.metrics, 0.0)}
        self._tool_specs = _specs(
            tool_functions(
                [*loaded.shared_toolsets, *loaded.task_class.toolsets(loaded.task_config)]
            )
        )
        if "max_turns" not in settings and self._tool_specs:
            settings["max_turns"] = 10
        super().__init__(**settings)

    @property
    def reward_keys(self) -> tuple[str, ...]:
        """The task's reward names, then its metric names."""
        return self._reward_keys

    def _loaded(self, split: DatasetSplit) -> Loaded:
        cache: dict[str, Loaded] = vars(self).setdefault("_vf_loaded", {})
        key = "eval" if split == "eval" and self.eval_env_args is not None else "train"
        if key not in cache:
            args = (
                self.env_args if key == "train" else {**self.env_args, **(self.eval_env_args or {})}
            )
            cache[key] = loaded_environment(self.env_id, args)
        return cache[key]

    def _examples(self, split: DatasetSplit, max_examples: int | None) -> list[Example[JsonRow]]:
        """The taskset's tasks, in ``load()`` order."""
        loaded = self._loaded(split)
        taskset = loaded.taskset
        if max_examples is not None:
            taskset = taskset.take(max_examples)
        elif not taskset.bounded:
            raise ValueError(
                f"VerifiersEnv env_id {self.env_id!r} is an infinite taskset: pass --max-examples"
            )
        examples: list[Example[JsonRow]] = []
        seen: dict[str, int] = {}
        # The module verifiers imports for the id (``owner/my-env@1.0`` -> ``my_env``).
        identity = self.env_id.rsplit("/", 1)[-1].split("@", 1)[0].replace("-", "_").lower()
        for task in taskset:
            key = task.key
            if key in seen:
                raise ValueError(
                    f"VerifiersEnv env_id {self.env_id!r}: tasks {seen[key]} and {task.data.idx} "
                    f"share the key {key!r} (task keys must be unique within a taskset)"
                )
            seen[key] = task.data.idx
            payload: JsonRow = {
                "prompt_messages": prompt_messages(task.data),
                self.payload_key: {"split": split, "task": task.data.model_dump(mode="json")},
            }
            examples.append(
                Example(
                    id=canonical_example_id({self.payload_key: identity, "key": key}),
                    payload=payload,
                )
            )
        return examples

    def _task(self, source: Mapping[str, object]) -> Any:
        split = source.get("split", "train")
        loaded = self._loaded("eval" if split == "eval" else "train")
        data = loaded.task_class.data_type().model_validate(source["task"])
        return loaded.task_class(data, loaded.task_config)

    async def list_tools(self) -> list[Tool]:
        """The ``@vf.tool`` methods of the task's and taskset's toolsets."""
        return [cast(Tool, dict(spec)) for spec in self._tool_specs]

    @asynccontextmanager
    async def rollout_context(
        self, rollout_id: str, example: Example[JsonRow]
    ) -> AsyncIterator[None]:
        """Build the task's toolsets for this rollout (``setup``, ``setup_task``)."""
        if not self._tool_specs:
            yield
            return
        source = example.payload[self.payload_key]
        task = self._task(source)
        toolsets = type(task).toolsets(task.config)
        for toolset in toolsets:
            await toolset.setup()
            await toolset.setup_task(task.data)
        shared = await self._shared_toolsets(source)
        tools: dict[str, dict[str, Callable[..., Any]]] = vars(self).setdefault(
            "_vf_rollout_tools", {}
        )
        tools[rollout_id] = tool_functions([*shared, *toolsets])
        try:
            yield
        finally:
            tools.pop(rollout_id, None)

    async def _shared_toolsets(self, source: Mapping[str, object]) -> tuple[Any, ...]:
        loaded = self._loaded("eval" if source.get("split") == "eval" else "train")
        # Set up once per loaded taskset and event loop (a toolset's resources are loop-bound).
        ready: dict[tuple[int, int], asyncio.Task[None]] = vars(self).setdefault(
            "_vf_shared_ready", {}
        )
        key = (id(loaded), id(asyncio.get_running_loop()))
        setup = ready.get(key)
        if setup is None:
            setup = ready[key] = asyncio.ensure_future(_set_up(loaded.shared_toolsets))
        await asyncio.shield(setup)
        return loaded.shared_toolsets

    async def run_tool(self, rollout_id: str, tool_name: str, **tool_args: Any) -> Any:
        """Run one ``@vf.tool`` method (its exception becomes a tool error)."""
        from benchmax.tools import FunctionTool, ToolError

        functions = vars(self).get("_vf_rollout_tools", {}).get(rollout_id, {})
        function = functions.get(tool_name)
        if function is None:
            raise ValueError(f"Unknown tool: {tool_name}")
        tool = FunctionTool(function, name=tool_name)
        try:
            return await tool.invoke(tool_args)
        except ToolError:
            raise
        except Exception as error:  # as verifiers' MCP server: the model sees the error
            raise ToolError(f"Error executing tool {tool_name}: {error}") from error

    async def compute_reward(self, rollout: BaseRollout) -> dict[str, float]:
        """The task's rewards and metrics as verifiers' ``Task.score`` computes them."""
        source = rollout.example_args[self.payload_key]
        task = self._task(source)
        prompt_length = len(prompt_messages(task.data))
        trace = scoring_trace(task, rollout.messages, prompt_length)
        await task.score(trace)
        scores: dict[str, float] = {}
        rewards = dict(trace.rewards)
        metrics = dict(trace.metrics)
        extra = sorted((set(rewards) | set(metrics)) - set(self._reward_keys))
        if extra:
            raise RolloutFailure(
                REWARD_ERROR,
                f"verifiers scored keys benchmax did not declare ({', '.join(extra)}): a reward "
                "returning keyed scores is not supported",
            )
        for key in self._reward_keys:
            value = rewards.get(key) if key in rewards else metrics.get(key)
            score = getattr(value, "score", value)
            if score is None:
                raise RolloutFailure(REWARD_ERROR, f"verifiers left {key!r} unscored")
            scores[key] = float(score)
            if not math.isfinite(scores[key]) and (self.reward_weights or {}).get(key) == 0.0:
                # verifiers PR #1546: a zero-weight score never decides the reward.
                logger.warning(
                    "verifiers.zero_weight_not_finite key=%s: %r scored %s; it has weight 0, "
                    "so it is recorded as 0.0 and the reward is unaffected",
                    key,
                    key,
                    scores[key],
                )
                scores[key] = 0.0
        return scores


async def _set_up(toolsets: tuple[Any, ...]) -> None:
    for toolset in toolsets:
        await toolset.setup()


def _specs(functions: Mapping[str, Callable[..., Any]]) -> tuple[dict[str, object], ...]:
    from benchmax.tools import FunctionTool

    return tuple(FunctionTool(fn, name=name).spec for name, fn in functions.items())


def _checked_args(name: str, value: object) -> dict[str, object]:
    checked = checked_object(VerifiersEnv.source_name, name, value)
    if "id" in checked:
        raise ValueError(f"VerifiersEnv {name} must not set 'id' (it is env_id)")
    return checked
