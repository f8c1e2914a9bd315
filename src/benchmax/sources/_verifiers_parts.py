"""What ``VerifiersEnv`` reads from a verifiers 0.4 environment, and the trace it scores.

``loaded_environment`` goes through verifiers' own loader (``resolve_env_config`` and
``load_environment``) and refuses, with one ``ValueError`` naming the part, what
benchmax's runtime cannot run (``refusals``). ``scoring_trace`` turns a benchmax
transcript into a verifiers ``Trace`` (one linear branch) for ``Task.score``, and
``prompt_messages`` turns a task's prompt into chat messages.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from benchmax._message_content import content_text, split_reasoning
from benchmax.sources._peers import import_peer

__all__ = [
    "Loaded",
    "loaded_environment",
    "prompt_messages",
    "scoring_trace",
    "tool_functions",
    "verifiers_module",
]

# Task hooks that run inside a verifiers runtime (a sandbox), which benchmax does not have.
_RUNTIME_HOOKS = ("setup", "finalize", "stage_verifier")


def verifiers_module() -> Any:
    """``verifiers.v1`` (imported on first use)."""
    return import_peer(
        "verifiers.v1", distribution="verifiers", extra="verifiers", needed_by="VerifiersEnv"
    )


@dataclass(frozen=True)
class Loaded:
    """One loaded verifiers environment: its taskset, task class and scoring shape."""

    taskset: Any
    task_class: Any
    task_config: Any
    rewards: dict[str, float]  # reward name -> weight
    metrics: tuple[str, ...]
    shared_toolsets: tuple[Any, ...]


def loaded_environment(env_id: str, env_args: Mapping[str, object]) -> Loaded:
    """Load ``env_id`` with ``env_args`` (the taskset config's fields) through verifiers.

    Raises ``ValueError`` naming ``env_id`` (not installed), ``env_args`` (a field the
    taskset's config refuses) or what is unsupported (see the module docstring).
    """
    vf = verifiers_module()
    from pydantic import ValidationError

    try:
        config = vf.resolve_env_config({"taskset": {**env_args, "id": env_id}})
    except ModuleNotFoundError as error:
        raise ValueError(f"VerifiersEnv env_id {env_id!r}: {error}") from None
    except ValidationError as error:
        raise ValueError(f"VerifiersEnv env_args: {_first_problem(error)}") from None
    except (TypeError, ValueError, AttributeError) as error:
        raise ValueError(f"VerifiersEnv env_id {env_id!r}: {error}") from None
    environment = vf.load_environment(config)
    if type(environment) is not vf.SingleAgentEnv:
        raise ValueError(
            f"VerifiersEnv env_id {env_id!r}: its Env is {type(environment).__name__}, a "
            "multi-agent environment; benchmax runs single-agent tasksets only"
        )
    if vf.default_harness_id(env_id) != "bash":
        raise ValueError(
            f"VerifiersEnv env_id {env_id!r} ships its own Harness (an agent program); "
            "benchmax runs the model's chat/tool loop itself and cannot run it"
        )
    taskset = environment.taskset
    task_class = type(taskset).task_type()
    task_config = taskset.config.task
    first = next(iter(taskset.take(1)), None)
    if first is None:
        raise ValueError(
            f"VerifiersEnv env_id {env_id!r} loads no task (with env_args {dict(env_args)})"
        )
    refusal = refusals(first)
    if refusal:
        raise ValueError(f"VerifiersEnv env_id {env_id!r}: {refusal}")
    rewards = {fn.__name__: float(getattr(fn, "_vf_weight", 1.0)) for fn in first.hooks("reward")}
    metrics = tuple(fn.__name__ for fn in first.hooks("metric"))
    clash = sorted(set(rewards) & set(metrics))
    if clash:
        raise ValueError(
            f"VerifiersEnv env_id {env_id!r}: {clash[0]!r} is both a reward and a metric"
        )
    if not rewards and not metrics:
        raise ValueError(f"VerifiersEnv env_id {env_id!r}: its task declares no @vf.reward")
    shared = tuple(type(taskset).toolsets(taskset.config))
    own = {task_class, type(first)}  # the declared task type, and the one load() yields
    for toolset in (*shared, *(t for cls in own for t in cls.toolsets(task_config))):
        problem = _toolset_refusal(toolset)
        if problem:
            raise ValueError(f"VerifiersEnv env_id {env_id!r}: {problem}")
    return Loaded(taskset, task_class, task_config, rewards, metrics, shared)


def refusals(task: Any) -> str | None:
    """Why benchmax cannot run ``task``, or ``None``."""
    vf = verifiers_module()
    name = type(task).__name__
    if getattr(task, "NEEDS_CONTAINER", False):
        return f"task {name} needs a container (NEEDS_CONTAINER)"
    for hook in _RUNTIME_HOOKS:
        if getattr(type(task), hook) is not getattr(vf.Task, hook):
            return f"task {name} overrides {hook}(), which needs a verifiers runtime (sandbox)"
    if task.config.judges:
        return f"task {name} plugs judges ({len(task.config.judges)}), which benchmax does not run"
    for kind in ("stop", "intercept"):
        hooks = task.hooks(kind) if kind == "stop" else _decorated(task, kind)
        if hooks:
            names = ", ".join(fn.__name__ for fn in hooks)
            return f"task {name} declares @vf.{kind} hooks ({names}), which benchmax does not run"
    for kind in ("reward", "metric"):
        for fn in task.hooks(kind):
            runtime = inspect.signature(fn).parameters.get("runtime")
            if runtime is not None and runtime.default is inspect.Parameter.empty:
                return f"task {name}'s @vf.{kind} {fn.__name__} needs a runtime (sandbox)"
    return None


def _decorated(task: Any, kind: str) -> list[Callable[..., Any]]:
    from verifiers.v1.utils.decorators import discover_decorated

    found: list[Callable[..., Any]] = discover_decorated(task, kind)
    return found


def _toolset_refusal(toolset: Any) -> str | None:
    vf = verifiers_module()
    from verifiers.v1.state import state_cls

    name = type(toolset).__name__
    if not isinstance(toolset, vf.Toolset):
        return f"tool server {name} is not a vf.Toolset (only @vf.tool toolsets run here)"
    if getattr(toolset.config, "url", None):
        return f"toolset {name} is a remote server (config.url), which benchmax does not call"
    if state_cls(type(toolset)) is not vf.State:
        return (
            f"toolset {name} shares rollout state ({state_cls(type(toolset)).__name__}) "
            "with the task, which benchmax does not carry"
        )
    return None


def tool_functions(toolsets: Sequence[Any]) -> dict[str, Callable[..., Any]]:
    """``{advertised name: bound @vf.tool method}``; the name is ``<server>_<tool>`` as
    verifiers' harnesses advertise it (the bare tool name when ``TOOL_PREFIX`` is None)."""
    from verifiers.v1.utils.decorators import discover_decorated

    functions: dict[str, Callable[..., Any]] = {}
    for toolset in toolsets:
        server = toolset.server_name
        for fn in discover_decorated(toolset, "tool"):
            tool = getattr(fn, "tool_name", None) or fn.__name__
            full = f"{server}_{tool}" if server else tool
            if full in functions:
                raise ValueError(f"VerifiersEnv: two tools are named {full!r}")
            functions[full] = fn
    return functions


def prompt_messages(data: Any) -> list[dict[str, object]]:
    """The chat messages a task opens with: its ``system_prompt``, then its ``prompt``
    (a string as one user message, or its messages). Raises ``ValueError`` for a task
    without a prompt (the user opens the conversation: a user simulator is needed)."""
    messages: list[dict[str, object]] = []
    if data.system_prompt:
        messages.append({"role": "system", "content": data.system_prompt})
    prompt = data.prompt
    if prompt is None or prompt == "" or prompt == []:
        raise ValueError(
            f"VerifiersEnv: task {data.idx} has no prompt (its user opens the conversation), "
            "which needs a user simulator benchmax does not run"
        )
    if isinstance(prompt, str):
        messages.append({"role": "user", "content": prompt})
        return messages
    for message in prompt:
        dumped = message.model_dump(mode="json", exclude_none=True)
        calls = dumped.pop("tool_calls", None)
        if calls:
            dumped["tool_calls"] = [
                {
                    "id": call["id"],
                    "type": "function",
                    "function": {"name": call["name"], "arguments": call["arguments"]},
                }
                for call in calls
            ]
        messages.append(dumped)
    return messages


def scoring_trace(task: Any, messages: Sequence[Mapping[str, object]], prompt_length: int) -> Any:
    """A verifiers ``Trace`` of ``task`` holding ``messages`` as one branch; the messages
    after the first ``prompt_length`` (the model's turns, tool results, ...) are the
    rollout's, and its assistant messages are ``sampled``."""
    vf = verifiers_module()
    from verifiers.v1.graph import MessageNode
    from verifiers.v1.state import state_cls
    from verifiers.v1.trace import AgentInfo, TraceTask

    nodes = []
    for index, message in enumerate(messages):
        converted = _vf_message(vf, message)
        sampled = index >= prompt_length and message.get("role") == "assistant"
        nodes.append(
            MessageNode(
                parent=None if index == 0 else index - 1, message=converted, sampled=sampled
            )
        )
    trace = vf.Trace(
        task=TraceTask(type=type(task).__name__, data=task.data, key=task.key, hash=task.hash),
        agent=AgentInfo(config=vf.AgentConfig()),
        state=state_cls(type(task))(),
        nodes=nodes,
    )
    trace.is_completed = True
    trace.ok = True
    return trace


def _vf_message(vf: Any, message: Mapping[str, object]) -> Any:
    role = message.get("role")
    content = message.get("content")
    if role == "assistant":
        text = split_reasoning(content_text(content))[0].strip()
        reasoning = message.get("reasoning_content") or message.get("reasoning")
        calls = []
        # Chat messages' tool calls: objects with a "function" object.
        raw_calls = cast("Sequence[Mapping[str, object]]", message.get("tool_calls") or [])
        for number, call in enumerate(raw_calls):
            call_id = str(call.get("id") or f"call_{number}")
            function = cast("Mapping[str, object]", call["function"])
            calls.append(
                vf.ToolCall(
                    id=call_id,
                    name=str(function["name"]),
                    arguments=_arguments_text(function.get("arguments")),
                )
            )
        return vf.AssistantMessage(
            content=text or None,
            reasoning_content=reasoning if isinstance(reasoning, str) else None,
            tool_calls=calls or None,
        )
    if role == "tool":
        return vf.ToolMessage(
            tool_call_id=str(message.get("tool_call_id") or ""),
            content=content_text(content),
            name=message.get("name") if isinstance(message.get("name"), str) else None,
        )
    parts = content if isinstance(content, list) else None
    body: str | list[Any] = content_text(content) if parts is None else _parts(vf, parts)
    if role == "system":
        return vf.SystemMessage(content=body)
    return vf.UserMessage(content=body)


def _parts(vf: Any, parts: list[object]) -> list[Any]:
    converted: list[Any] = []
    for part in parts:
        if isinstance(part, str):
            converted.append(vf.TextContentPart(text=part))
        elif isinstance(part, Mapping) and part.get("type", "text") == "text":
            converted.append(vf.TextContentPart(text=str(part.get("text", ""))))
        elif isinstance(part, Mapping) and part.get("type") == "image_url":
            url = (part.get("image_url") or {}).get("url", "")
            converted.append(vf.ImageUrlContentPart(image_url=vf.ImageUrlSource(url=str(url))))
    return converted


def _arguments_text(arguments: object) -> str:
    if isinstance(arguments, str):
        return arguments
    return json.dumps(arguments if arguments is not None else {})


def _first_problem(error: Any) -> str:
    problems = error.errors()
    if not problems:
        return str(error)
    first = problems[0]
    location = [str(part) for part in first.get("loc", ()) if part != "taskset"]
    where = ".".join(location)
    message = str(first.get("msg", "invalid"))
    return f"{where}: {message}" if where else message
