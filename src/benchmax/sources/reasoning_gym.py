"""reasoning-gym tasks as benchmax environments: ``ReasoningGymEnv(task, size, seed)``.

reasoning-gym (``pip install 'benchmax[reasoning-gym]'``) generates each task's examples
procedurally from a seed and scores an answer with the task's own ``score_answer``. This
environment asks one question per example and rewards the reply with that scorer::

    uv run benchmax run benchmax.sources.reasoning_gym:ReasoningGymEnv \\
        --env-arg task=chain_sum --env-arg size=8 \\
        --mock-policy examples/arithmetic_gym/policy.py:reply

Datasets. Example ``i`` of a split is reasoning-gym's item ``i`` of
``create_dataset(task, seed=S, size=N, **config)``, where the train split uses
``S = seed`` and ``N = size`` and the eval split uses ``S = seed + EVAL_SEED_OFFSET``
(10**9) and ``N = eval_size`` (default ``size``). reasoning-gym seeds item ``i`` with
``S + i``, so the two splits never share an item seed (the offset exceeds any allowed
size); tasks with few distinct questions can still repeat a question by chance. An
example's id is the canonical id of its task, config, seed, size, index and question:
the same arguments give the same ids (and questions) on every run.

Prompt and answer. The system prompt is reasoning-gym's ``SYSTEM_PROMPTS["default"]``
(answer inside ``<answer></answer>``), unless ``system_prompt`` is given (``""`` sends
none); the user message is the question. The answer is read from the last assistant
message as reasoning-gym's evaluation reads it (``reasoning_gym.utils.extract_answer``:
the last ``<answer>`` block, stripped; ``None`` without one) after the project's
reasoning rule (``benchmax.rewards.text.without_reasoning``: ``<think>`` blocks are never
the answer, and a reply cut off inside one has none).

Reward. One key, ``score``: the task's ``score_answer(answer, entry)`` (a float, 1.0 for
a correct answer; some tasks give partial credit), on the entry regenerated from the
example's task, config, seed, size and index (so reasoning-gym's own metadata, which is
not JSON, reaches the scorer unchanged). A regenerated question that differs from the
example's (another reasoning-gym version) settles the rollout as ``reward_error``.

Errors. A bad argument raises ``ValueError`` (``TypeError`` for a wrong type) naming it:
an unknown ``task`` (with close names), a ``size``/``seed`` out of range, a ``config``
field the task does not have or a value its config refuses. Other keyword arguments are
``BaseEnv``'s settings (``max_turns``, ``model_timeout``, ``sampling_args``, ...).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import threading
from collections.abc import Mapping
from typing import Any, ClassVar, TypedDict, cast

from benchmax.envs import (
    BaseRollout,
    DatasetSplit,
    Example,
    JsonRow,
    RolloutFailure,
    canonical_example_id,
)
from benchmax.envs.shared_types import REWARD_ERROR
from benchmax.rewards import extract_completion_text
from benchmax.rewards.text import without_reasoning
from benchmax.sources._arguments import checked_json, checked_object
from benchmax.sources._base import EVAL_SEED_OFFSET, SeededSourceEnv
from benchmax.sources._peers import close_names, import_peer

__all__ = ["EVAL_SEED_OFFSET", "REWARD_KEY", "ReasoningGymEnv"]


class _Source(TypedDict):
    """Where an example's entry comes from (the payload's ``reasoning_gym`` field): the
    generator to rebuild and the item's index in it."""

    task: str
    config: Mapping[str, object]
    seed: int
    size: int
    index: int


REWARD_KEY = "score"
"""The one reward key: reasoning-gym's ``score_answer``."""

_OWN_ARGUMENTS = frozenset({"size", "seed"})


class ReasoningGymEnv(SeededSourceEnv):
    """One reasoning-gym task: a question per example, scored by the task's scorer.

    ``task`` is a registered reasoning-gym task name (``chain_sum``, ``leg_counting``,
    ``composite``...); ``size`` examples in the train split (``eval_size``, default the
    same, in the eval split); ``seed`` the generator seed; ``config`` the task's own
    options (its config dataclass fields, e.g. ``{"min_terms": 3}``). See the module
    docstring for splits, ids, answer extraction and errors.
    """

    reward_keys = (REWARD_KEY,)
    max_turns: int | None = 1
    source_name = "ReasoningGymEnv"
    payload_key = "reasoning_gym"
    process_local: ClassVar[tuple[str, ...]] = (
        "_generators",
        "_generators_lock",
    )  # locks do not pickle

    def __init__(
        self,
        task: str,
        size: int = 100,
        seed: int = 0,
        *,
        config: Mapping[str, object] | None = None,
        eval_size: int | None = None,
        system_prompt: str | None = None,
        **settings: Any,
    ) -> None:
        super().__init__(**settings)
        self.task = _checked_task(task)
        self.size, self.eval_size = self._set_seeded_splits(
            size, eval_size, seed, names=("size", "eval_size")
        )
        self.config = _checked_config(self.task, config)
        self.system_prompt = (
            self._checked_text("system_prompt", system_prompt)
            if system_prompt is not None
            else str(_peer("reasoning_gym.utils").SYSTEM_PROMPTS["default"])
        )
        self._start_process_state()
        # The task's config refuses bad values only when a dataset is made: make one now.
        self._generator(self.task, self.config, self.seed, self.size)

    def _start_process_state(self) -> None:
        self._generators: dict[tuple[str, str, int, int], Any] = {}  # regenerated on demand
        self._generators_lock = threading.Lock()

    def _examples(self, split: DatasetSplit, max_examples: int | None) -> list[Example[JsonRow]]:
        """The split's examples, generated by reasoning-gym."""
        size, count = self._split_count(split, max_examples)
        seed = self.split_seed(split)
        generator = self._generator(self.task, self.config, seed, size)
        return [self._example(seed, size, index, generator[index]) for index in range(count)]

    def _example(
        self, seed: int, size: int, index: int, entry: Mapping[str, object]
    ) -> Example[JsonRow]:
        question = str(entry["question"])
        source: _Source = {
            "task": self.task,
            "config": self.config,
            "seed": seed,
            "size": size,
            "index": index,
        }
        payload: JsonRow = {
            "prompt_messages": self._prompt(self.system_prompt, question),
            self.payload_key: source,
            "answer": _json_value(entry.get("answer")),
        }
        return Example(id=canonical_example_id({**source, "question": question}), payload=payload)

    async def compute_reward(self, rollout: BaseRollout) -> dict[str, float]:
        """``{"score": score_answer(answer, entry)}`` (see the module docstring)."""
        text = without_reasoning(extract_completion_text(rollout.messages))
        answer = _peer("reasoning_gym.utils").extract_answer(text)
        source = self._source_record(rollout.example_args)
        if source is None:
            raise RolloutFailure(REWARD_ERROR, f"example has no {self.payload_key!r} field")
        question = next(
            (m.get("content") for m in rollout.messages if m.get("role") == "user"), None
        )
        # The payload field as _example wrote it.
        score = await asyncio.to_thread(self._score_entry, cast(_Source, source), question, answer)
        return {REWARD_KEY: score}

    def _score_entry(self, source: _Source, question: object, answer: str | None) -> float:
        generator = self._generator(
            source["task"], source["config"], source["seed"], source["size"]
        )
        entry = generator[source["index"]]
        if question is not None and str(entry["question"]) != question:
            raise RolloutFailure(
                REWARD_ERROR,
                f"reasoning-gym regenerated another question for {source['task']} item "
                f"{source['index']} (seed {source['seed']}): was the example made by "
                "another reasoning-gym version or config?",
            )
        return float(generator.score_answer(answer, entry))

    def _generator(self, task: str, config: Mapping[str, object], seed: int, size: int) -> Any:
        key = (task, json.dumps(config, sort_keys=True), seed, size)
        with self._generators_lock:
            generator = self._generators.get(key)
            if generator is None:
                generator = _create_dataset(task, config, seed, size)
                self._generators[key] = generator
            return generator


def _peer(module: str) -> Any:
    """reasoning-gym's ``module``, imported on first use."""
    return import_peer(
        module,
        distribution="reasoning-gym",
        extra="reasoning-gym",
        needed_by="ReasoningGymEnv",
        quiet_syntax_warnings=QUIET_DEPENDENCIES,
    )


QUIET_DEPENDENCIES = ("cellpylib",)
"""reasoning-gym's dependencies whose ``SyntaxWarning``s are silenced at import
(cellpylib 2.4's ``memoize is "recursive"``, printed on every run without a bytecode cache)."""


def _registry() -> Mapping[str, tuple[type, type]]:
    factory = _peer("reasoning_gym.factory")
    _peer("reasoning_gym")  # registers every task
    registry: Mapping[str, tuple[type, type]] = factory.DATASETS
    return registry


def _checked_task(task: object) -> str:
    if not isinstance(task, str):
        raise TypeError(f"ReasoningGymEnv task must be a task name (a string), not {task!r}")
    known = sorted(_registry())
    if task not in known:
        raise ValueError(
            f"ReasoningGymEnv task {task!r} is not a reasoning-gym task"
            f"{close_names(task, known)}; reasoning-gym {len(known)} tasks include "
            f"{', '.join(known[:5])}, ..."
        )
    return task


def _checked_config(task: str, config: object) -> dict[str, object]:
    if config is None:
        return {}
    checked = checked_object("ReasoningGymEnv", "config", config)
    given = sorted(_OWN_ARGUMENTS & set(checked))
    if given:
        raise ValueError(
            f"ReasoningGymEnv config must not set {', '.join(given)}: pass "
            f"{' and '.join(given)} as constructor arguments"
        )
    checked_json("ReasoningGymEnv", "config", checked)
    config_class = _registry()[task][1]
    fields = sorted(
        f.name for f in dataclasses.fields(config_class) if f.name not in _OWN_ARGUMENTS
    )
    unknown = sorted(set(checked) - set(fields))
    if unknown:
        raise ValueError(
            f"ReasoningGymEnv config field {unknown[0]!r} is not an option of {task} "
            f"({config_class.__name__} fields: {', '.join(fields) or 'none'})"
        )
    return checked


def _create_dataset(task: str, config: Mapping[str, object], seed: int, size: int) -> Any:
    reasoning_gym = _peer("reasoning_gym")
    try:
        return reasoning_gym.create_dataset(task, seed=seed, size=size, **config)
    except Exception as error:  # the task's config refused a value (often AssertionError)
        reason = str(error) or type(error).__name__
        raise ValueError(f"ReasoningGymEnv config for {task} is invalid: {reason}") from None


def _json_value(value: object) -> object:
    """``value`` if it is JSON, else its text (answers are shown, never scored, from here)."""
    try:
        canonical_example_id(value)
    except ValueError:
        return str(value)
    return value
