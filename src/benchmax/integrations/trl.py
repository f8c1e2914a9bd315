"""Train with TRL's ``GRPOTrainer`` on a benchmax environment, with the exact tokens sampled.

``GRPOTrainer(rollout_func=..., reward_funcs=[benchmax_reward])`` hands generation to
benchmax: :class:`RolloutFunc` runs one benchmax group per example against an
OpenAI-compatible endpoint that returns token ids and logprobs (vLLM, SGLang, ``trl
vllm-serve``... see ``docs/training.md``) and gives TRL the ids the server
sampled, their logprobs and the mask of environment-added tokens; :func:`benchmax_reward`
hands TRL the environment's scalar reward. This module imports neither ``trl`` nor
``torch``: it returns plain lists (install ``benchmax[trl]`` for the trainer).

What TRL 1.16 does with it (``trl/trainer/grpo_trainer.py``): its ``RepeatSampler`` puts
each dataset row ``num_generations`` times in a row into the generation batch, and
``rollout_func(prompts, trainer)`` receives that per-process slice of prompts as is (each
prompt once per generation, no de-duplication) and must return one completion per prompt,
in order: the dict needs ``prompt_ids``, ``completion_ids`` and ``logprobs`` (lists of
per-row lists); ``env_mask`` (0 marks tokens the model did not sample) is multiplied into
the loss mask; every other key is merged into the rows' inputs and reaches each reward
function as a keyword argument (one value per row). A reward function returning ``None``
for a row makes it unscorable: TRL leaves it out of its group's mean and std and sets its
advantage to 0. With ``use_vllm=False`` the returned logprobs are kept as
``sampling_per_token_logps`` but only read by the optional off-policy mask; with
``use_vllm=True`` TRL syncs its weights to the vLLM server before calling
``rollout_func`` and corrects with them (importance sampling).

A non-trainable rollout (``Trajectory.trainable`` false: ``model_error``, timeouts,
``context_exceeded`` and the other operational failures) never teaches the model: all of
its ``env_mask`` is 0 (none of its tokens enters the loss) *and* :func:`benchmax_reward`
returns ``None`` for it, so it does not move its siblings' baseline either.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import threading
from collections.abc import Callable, Coroutine, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmax.auth import ModelAuth, StaticBearerAuth
from benchmax.envs import (
    DatasetSplit,
    Environment,
    Example,
    RolloutRequest,
    canonical_example_id,
)
from benchmax.integrations._sequence import RolloutSequence, rollout_sequence
from benchmax.training import CollectedGroup, collect_group, rollout_seed
from benchmax.trajectory import Trajectory

__all__ = [
    "RolloutFunc",
    "benchmax_reward",
    "dataset_rows",
    "load_examples",
]

logger = logging.getLogger(__name__)

ROLLOUT_ID_PLACEHOLDER = "{rollout_id}"
"""In ``base_url``, replaced by each rollout's id (``trl-<call>-<group>-<index>``)."""

REWARD_KEY = "benchmax_reward"
"""The extra field holding each row's scalar reward (``None``: not trainable)."""


def load_examples(
    env: Environment[Any, Any],
    split: DatasetSplit,
    base_dir: str | Path,
    *,
    max_examples: int | None = None,
) -> list[Example[Any]]:
    """The examples of ``env``'s ``split`` read from ``base_dir`` (``create_dataset`` run
    on a private event loop, in a worker thread when this thread already runs one, e.g.
    in a notebook); whatever ``create_dataset`` raises propagates."""

    async def read() -> list[Example[Any]]:
        dataset = await env.create_dataset(split, Path(base_dir), max_examples=max_examples)
        return list(dataset)

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(read())
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, read()).result()


def dataset_rows(examples: Iterable[Example[Any]]) -> list[dict[str, Any]]:
    """One TRL dataset row per example: ``{"prompt": <its prompt_messages>, "example_id":
    <its id>}`` (``datasets.Dataset.from_list(rows)``). ``ValueError`` for a payload
    without a ``prompt_messages`` list."""
    return [{"prompt": _prompt_messages(example), "example_id": example.id} for example in examples]


def benchmax_reward(
    prompts: Sequence[Any], completions: Sequence[Any], **kwargs: Any
) -> list[float | None]:
    """TRL reward function: each row's benchmax scalar reward, ``None`` for a
    non-trainable rollout (TRL then leaves it out of its group and zeroes its advantage).

    Reads the ``benchmax_reward`` field :class:`RolloutFunc` returns; ``KeyError`` when the
    trainer's rollouts did not come from a :class:`RolloutFunc`.
    """
    rewards = kwargs.get(REWARD_KEY)
    if rewards is None:
        raise KeyError(
            "benchmax_reward needs the benchmax_reward field of a benchmax RolloutFunc; "
            "pass rollout_func=RolloutFunc(...) to GRPOTrainer"
        )
    return list(rewards)


@dataclass(frozen=True, slots=True)
class _Row:
    """Where one prompt of TRL's batch goes: its example and its place in the group."""

    example: Example[Any]
    group: int
    index: int


class RolloutFunc:
    """A ``rollout_func`` for TRL's ``GRPOTrainer`` running ``env``'s rollouts.

    ``examples`` are the examples the trainer's dataset refers to (build that dataset with
    :func:`dataset_rows`). A prompt TRL passes is matched to an example by its
    ``prompt_messages`` (or, when it is a string, by example id); ``ValueError`` at
    construction when two examples share a prompt, and when called with a prompt that
    matches none. Each call runs, concurrently, one benchmax group per distinct example of
    the batch with as many rollouts as TRL repeated it (``num_generations``) through
    ``benchmax.training.collect_group``, every request asking the server for token ids and
    logprobs (``record_tokens``), against ``base_url`` (``{rollout_id}`` in it becomes the
    rollout's id, ``trl-<call>-<group>-<index>``) with ``model``; ``model_auth``
    defaults to ``Bearer EMPTY`` (vLLM's convention for no key). ``sampling_args`` go into
    every request; by default they carry the trainer's ``temperature`` and ``top_p``. With
    ``seed``, every rollout sends its own ``seed``: ``benchmax.training.rollout_seed(seed +
    n, example id, index in the group)`` for the ``n``-th call (a ``seed`` in
    ``sampling_args`` wins),
    so a server that honours seeds samples reproducibly whatever the request order.

    Per prompt, in TRL's order, the call returns ``prompt_ids``, ``completion_ids``,
    ``logprobs``, ``env_mask`` (see ``_sequence``: the last training sample of the
    rollout, all-zero mask when not trainable; a rollout without any tokens becomes a
    one-token placeholder, the tokenizer's EOS, masked) and the extra fields
    ``benchmax_reward`` (the scalar by the environment's ``reward_weights``, ``None`` when
    not trainable), ``benchmax_rewards`` (the reward map),
    ``termination_reason``, ``rollout_id``, ``trainable`` and ``token_prefix_breaks``.
    ``on_group(trajectories)`` is called with each group's trajectories (e.g. to log or
    keep them). Rollouts run on a private event loop thread; :meth:`close` (or ``with``)
    stops it and closes the environment. ``calls_done`` (default 0) is the number of
    calls already made by the run being resumed: the call counter starts there.
    """

    def __init__(
        self,
        env: Environment[Any, Any],
        examples: Iterable[Example[Any]],
        *,
        base_url: str,
        model: str,
        model_auth: ModelAuth | None = None,
        sampling_args: Mapping[str, Any] | None = None,
        split: DatasetSplit = "train",
        seed: int | None = None,
        on_group: Callable[[Sequence[Trajectory]], None] | None = None,
        calls_done: int = 0,
    ) -> None:
        self.env = env
        self.base_url = base_url
        self.model = model
        self._auth: ModelAuth = model_auth or StaticBearerAuth("EMPTY")
        self._sampling_args = None if sampling_args is None else dict(sampling_args)
        self._split: DatasetSplit = split
        self._seed = seed
        self._on_group = on_group
        self._by_prompt: dict[str, Example[Any]] = {}
        self._by_id: dict[str, Example[Any]] = {}
        for example in examples:
            key = canonical_example_id(_prompt_messages(example))
            other = self._by_prompt.get(key)
            if other is not None and other.id != example.id:
                raise ValueError(
                    f"examples {other.id!r} and {example.id!r} have the same prompt_messages; "
                    "TRL hands rollout_func only the prompt: give each example its own prompt "
                    "or use example ids as the dataset's prompts"
                )
            self._by_prompt[key] = example
            self._by_id[example.id] = example
        self._calls = itertools.count(calls_done)
        self._calls_done = calls_done
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="benchmax-trl-rollouts", daemon=True
        )
        self._thread.start()

    @property
    def calls_done(self) -> int:
        """How many calls were made (``calls_done`` given at construction included): pass
        it back as ``calls_done`` when resuming so rollout ids and seeds continue."""
        return self._calls_done

    def __enter__(self) -> RolloutFunc:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the environment's connections and stop the rollout thread (idempotent)."""
        if self._loop.is_closed():
            return
        if self._thread.is_alive():
            self._run(self.env.aclose())
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join()
        self._loop.close()

    def __call__(self, prompts: Sequence[Any], trainer: Any) -> dict[str, list[Any]]:
        """Run the rollouts for TRL's ``prompts``; the dict described in the class docs."""
        rows = self._rows(prompts)
        call = next(self._calls)
        self._calls_done = call + 1
        groups: dict[str, list[_Row]] = {}
        for row in rows:
            groups.setdefault(row.example.id, []).append(row)
        sampling_args = self._sampling_args_for(trainer)
        requests = [
            [
                RolloutRequest(
                    rollout_id=f"trl-{call}-{group}-{index}",
                    example=members[0].example,
                    model=self.model,
                    base_url=self.base_url.replace(
                        ROLLOUT_ID_PLACEHOLDER, f"trl-{call}-{group}-{index}"
                    ),
                    model_auth=self._auth,
                    split=self._split,
                    sampling_args=self._seeded(sampling_args, call, members[0].example, index),
                    record_tokens=True,
                )
                for index in range(len(members))
            ]
            for group, members in enumerate(groups.values())
        ]
        results = self._run(self._collect(requests))
        filler = _placeholder_token(trainer)
        output: dict[str, list[Any]] = {
            key: []
            for key in (
                "prompt_ids",
                "completion_ids",
                "logprobs",
                "env_mask",
                REWARD_KEY,
                "benchmax_rewards",
                "termination_reason",
                "rollout_id",
                "trainable",
                "token_prefix_breaks",
            )
        }
        for row in rows:
            collected = results[row.group]
            trajectory = collected.trajectories[row.index]
            sequence = rollout_sequence(trajectory) or _placeholder(filler)
            output["prompt_ids"].append(list(sequence.prompt_ids))
            output["completion_ids"].append(list(sequence.completion_ids))
            output["logprobs"].append(list(sequence.completion_logprobs))
            output["env_mask"].append(list(sequence.completion_mask))
            trainable = trajectory.trainable and sequence.trainable
            output[REWARD_KEY].append(collected.scalar_rewards[row.index] if trainable else None)
            output["benchmax_rewards"].append(dict(trajectory.rewards))
            output["termination_reason"].append(trajectory.termination_reason)
            output["rollout_id"].append(trajectory.rollout_id)
            output["trainable"].append(trainable)
            output["token_prefix_breaks"].append(trajectory.token_prefix_breaks)
        return output

    def _rows(self, prompts: Sequence[Any]) -> list[_Row]:
        rows: list[_Row] = []
        groups: dict[str, int] = {}
        sizes: dict[str, int] = {}
        for prompt in prompts:
            example = self._example_for(prompt)
            group = groups.setdefault(example.id, len(groups))
            index = sizes.get(example.id, 0)
            sizes[example.id] = index + 1
            rows.append(_Row(example, group, index))
        return rows

    def _example_for(self, prompt: Any) -> Example[Any]:
        if isinstance(prompt, str):
            found = self._by_id.get(prompt)
        else:
            try:
                found = self._by_prompt.get(canonical_example_id(prompt))
            except ValueError:
                found = None
        if found is None:
            raise ValueError(
                "rollout_func got a prompt that matches no example's prompt_messages "
                "(build the trainer's dataset with benchmax.integrations.trl.dataset_rows)"
            )
        return found

    def _sampling_args_for(self, trainer: Any) -> dict[str, Any]:
        if self._sampling_args is not None:
            return dict(self._sampling_args)
        args = getattr(trainer, "args", None)
        chosen: dict[str, Any] = {}
        for name in ("temperature", "top_p"):
            value = getattr(args, name, None)
            if isinstance(value, int | float) and not isinstance(value, bool):
                chosen[name] = float(value)
        return chosen

    def _seeded(
        self, sampling_args: dict[str, Any], call: int, example: Example[Any], index: int
    ) -> dict[str, Any]:
        if self._seed is None or "seed" in sampling_args:
            return sampling_args
        return {**sampling_args, "seed": rollout_seed(self._seed + call, example.id, index)}

    async def _collect(
        self, groups: Sequence[Sequence[RolloutRequest[Any]]]
    ) -> list[CollectedGroup]:
        async def one(requests: Sequence[RolloutRequest[Any]]) -> CollectedGroup:
            collected = await collect_group(self.env, requests)
            if self._on_group is not None:
                self._on_group(collected.trajectories)
            return collected

        return list(await asyncio.gather(*(one(requests) for requests in groups)))

    def _run[T](self, coroutine: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result()


def _prompt_messages(example: Example[Any]) -> list[Any]:
    payload = example.payload
    prompt = payload.get("prompt_messages") if isinstance(payload, Mapping) else None
    if not isinstance(prompt, list):
        raise ValueError(f"example {example.id!r} has no prompt_messages list")
    return prompt


def _placeholder_token(trainer: Any) -> int:
    tokenizer = getattr(trainer, "processing_class", None)
    for name in ("eos_token_id", "pad_token_id"):
        value = getattr(tokenizer, name, None)
        if isinstance(value, int):
            return value
    return 0


def _placeholder(token: int) -> RolloutSequence:
    return RolloutSequence(
        prompt_ids=(token,),
        completion_ids=(token,),
        completion_mask=(0,),
        completion_logprobs=(0.0,),
        trainable=False,
        dropped_samples=0,
    )
