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
from pathlib import Path
from typing import Any, TypedDict, cast

from benchmax._value_checks import is_int_at_least
from benchmax.envs import (
    BaseEnv,
    BaseRollout,
    Dataset,
    DatasetSplit,
    Example,
    JsonRow,
    RolloutFailure,
    canonical_example_id,
)
from benchmax.envs.shared_types import REWARD_ERROR
from benchmax.rewards import extract_completion_text
from benchmax.rewards.text import without_reasoning
from benchmax.sources._arguments import checked_count, checked_json, checked_object
from benchmax.sources._peers import close_names, import_peer

__all__ = ["EVAL_SEED_OFFSET", "REWARD_KEY", "ReasoningGymEnv"]


class _Source(TypedDict):
    """Where an example's entry comes from (the payload's ``_PAYLOAD_KEY`` field): the
    generator to rebuild and the item's index in it."""

    task: str
    config: Mapping[str, object]
    seed: int
    size: int
    index: int


EVAL_SEED_OFFSET = 1_000_000_000
"""Added to ``seed`` for the eval split; sizes are capped below it so the splits'
item seeds (``seed + i``) never meet."""

REWARD_KEY = "score"
"""The one reward key: reasoning-gym's ``score_answer``."""

_PAYLOAD_KEY = "reasoning_gym"
_OWN_ARGUMENTS = frozenset({"size", "seed"})


class ReasoningGymEnv(BaseEnv):
    """One reasoning-gym task: a question per example, scored by the task's scorer.

    ``task`` is a registered reasoning-gym task name (``chain_sum``, ``leg_counting``,
    ``composite``...); ``size`` examples in the train split (``eval_size``, default the
    same, in the eval split); ``seed`` the generator seed; ``config`` the task's own
    options (its config dataclass fields, e.g. ``{"min_terms": 3}``). See the module
    docstring for splits, ids, answer extraction and errors.
    """

    reward_keys = (REWARD_KEY,)
    max_turns: int | None = 1

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
        self.size = _checked_size("size", size)
        self.eval_size = self.size if eval_size is None else _checked_size("eval_size", eval_size)
        if not is_int_at_least(seed, 0):
            raise ValueError(f"ReasoningGymEnv seed must be a non-negative integer, not {seed!r}")
        self.seed = seed
        self.config = _checked_config(self.task, config)
        if system_prompt is None:
            utils = import_peer(
                "reasoning_gym.utils",
                distribution="reasoning-gym",
                extra="reasoning-gym",
                needed_by="ReasoningGymEnv",
            )
            system_prompt = str(utils.SYSTEM_PROMPTS["default"])
        elif not isinstance(system_prompt, str):
            raise TypeError("ReasoningGymEnv system_prompt must be a string or None")
        self.system_prompt = system_prompt
        self._generators: dict[tuple[str, str, int, int], Any] = {}
        self._generators_lock = threading.Lock()
        # The task's config refuses bad values only when a dataset is made: make one now.
        self._generator(self.task, self.config, self.seed, self.size)

    def __getstate__(self) -> dict[str, object]:
        state = dict(vars(self))
        state["_generators"] = {}  # regenerated on demand; locks do not pickle
        del state["_generators_lock"]
        return state

    def __setstate__(self, state: dict[str, object]) -> None:
        vars(self).update(state)
        self._generators_lock = threading.Lock()

    def split_seed(self, split: DatasetSplit) -> int:
        """The reasoning-gym seed of ``split``: ``seed`` or ``seed + EVAL_SEED_OFFSET``."""
        return self.seed if split == "train" else self.seed + EVAL_SEED_OFFSET

    async def create_dataset(
        self, split: DatasetSplit, base_dir: Path, *, max_examples: int | None = None
    ) -> Dataset[JsonRow]:
        """The split's examples, generated by reasoning-gym (``base_dir`` is not read)."""
        size = self.size if split == "train" else self.eval_size
        count = size if max_examples is None else min(size, max_examples)
        seed = self.split_seed(split)
        examples = await asyncio.to_thread(self._examples, seed, size, count)
        return Dataset(examples)

    def _examples(self, seed: int, size: int, count: int) -> list[Example[JsonRow]]:
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
        messages = [{"role": "user", "content": question}]
        if self.system_prompt:
            messages.insert(0, {"role": "system", "content": self.system_prompt})
        payload: JsonRow = {
            "prompt_messages": messages,
            _PAYLOAD_KEY: source,
            "answer": _json_value(entry.get("answer")),
        }
        return Example(id=canonical_example_id({**source, "question": question}), payload=payload)

    async def compute_reward(self, rollout: BaseRollout) -> dict[str, float]:
        """``{"score": score_answer(answer, entry)}`` (see the module docstring)."""
        utils = import_peer(
            "reasoning_gym.utils",
            distribution="reasoning-gym",
            extra="reasoning-gym",
            needed_by="ReasoningGymEnv",
        )
        text = without_reasoning(extract_completion_text(rollout.messages))
        answer = utils.extract_answer(text)
        source = rollout.example_args.get(_PAYLOAD_KEY)
        if not isinstance(source, Mapping):
            raise RolloutFailure(REWARD_ERROR, f"example has no {_PAYLOAD_KEY!r} field")
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


def _reasoning_gym() -> Any:
    return import_peer(
        "reasoning_gym",
        distribution="reasoning-gym",
        extra="reasoning-gym",
        needed_by="ReasoningGymEnv",
    )


def _registry() -> Mapping[str, tuple[type, type]]:
    factory = import_peer(
        "reasoning_gym.factory",
        distribution="reasoning-gym",
        extra="reasoning-gym",
        needed_by="ReasoningGymEnv",
    )
    _reasoning_gym()  # registers every task
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


def _checked_size(name: str, size: object) -> int:
    return checked_count("ReasoningGymEnv", name, size, below=EVAL_SEED_OFFSET)


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
    reasoning_gym = _reasoning_gym()
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
