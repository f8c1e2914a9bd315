"""TRL's ``rollout_func`` and reward function over benchmax groups (``benchmax.integrations.trl``
re-exports them; its docstring says how TRL uses them). ``benchmax train`` builds on them."""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from collections.abc import Callable, Coroutine, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from benchmax._group_pipeline import run_pool
from benchmax._vocabulary import MAX_TURNS_EXCEEDED, OUTPUT_EXCEEDED, TOOL_BUDGET_EXCEEDED
from benchmax.auth import ModelAuth, StaticBearerAuth
from benchmax.envs import (
    DatasetSplit,
    Environment,
    Example,
    RolloutRequest,
    canonical_example_id,
)
from benchmax.results import TrajectoryGroup
from benchmax.runner import rollout_seed
from benchmax.training._collect import collect_group
from benchmax.training._rollout_sequence import RolloutSequence, rollout_sequences
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

EXAMPLE_ID_KEY = "benchmax_example_id"
"""The message key carrying the example id in a prompt :func:`dataset_rows` built."""

REWARD_KEY = "benchmax_reward"
"""The extra field holding each row's scalar reward (``None``: not trainable)."""

BRANCH_ROWS_KEY = "benchmax_branch_rows"
"""The extra field holding, per rollout, how many rows (branches) the call returned for it
(``benchmax.training.BranchingGRPOTrainer`` reads it; the same name is defined there)."""

COVERAGE_KEY = "benchmax_coverage"
"""The extra field holding, per rollout, ``{"sampled_tokens", "trained_tokens"}``: the
tokens its model calls sampled and those its returned rows train (mask 1); both 0 for a
rollout that is not trainable (its tokens are left out on purpose)."""

SequenceBuilder = Callable[[Trajectory], Sequence[RolloutSequence]]
"""Builds a rollout's training sequences (``rollout_sequences`` by default)."""

BUDGET_ENDS = frozenset({OUTPUT_EXCEEDED, MAX_TURNS_EXCEEDED, TOOL_BUDGET_EXCEEDED})
"""Ordinary ends of a training rollout (it reached ``max_tokens``, ``max_turns`` or the
tool budget): :class:`RolloutFunc` counts them instead of letting the environment's
WARNING per rollout reach the console."""

_TERMINATED = "benchmax.rollout.terminated"


class _CountBudgetEnds(logging.Filter):
    """Drops the environment's ``benchmax.rollout.terminated`` WARNING for the given
    rollouts when they ended at a budget (:data:`BUDGET_ENDS`), counting them instead."""

    def __init__(self, rollout_ids: frozenset[str]) -> None:
        super().__init__()
        self.rollout_ids = rollout_ids
        self.counted = 0

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args if isinstance(record.args, tuple) else ()
        if (
            record.msg == f"{_TERMINATED} rollout_id=%s termination_reason=%s"
            and len(args) == 2
            and args[0] in self.rollout_ids
            and args[1] in BUDGET_ENDS
        ):
            self.counted += 1
            return False
        return True


def load_examples(
    env: Environment[Any, Any],
    split: DatasetSplit,
    base_dir: str | Path,
    *,
    max_examples: int | None = None,
) -> list[Example[object]]:
    """The examples of ``env``'s ``split`` read from ``base_dir`` (``create_dataset`` run
    on a private event loop, in a worker thread when this thread already runs one, e.g.
    in a notebook); whatever ``create_dataset`` raises propagates."""

    async def read() -> list[Example[object]]:
        dataset = await env.create_dataset(split, Path(base_dir), max_examples=max_examples)
        return list(dataset)

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(read())
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, read()).result()


def dataset_rows(examples: Iterable[Example[object]]) -> list[dict[str, object]]:
    """One TRL dataset row per example: ``{"prompt": <its prompt_messages>, "example_id":
    <its id>}`` (``datasets.Dataset.from_list(rows)``), the first message of the prompt
    carrying the id under ``benchmax_example_id`` too (TRL hands ``rollout_func`` only
    the prompt; see the module docs). A payload without a ``prompt_messages`` key (an
    ``AgentEnv`` task) is one user message holding the payload as JSON. ``ValueError`` for
    a ``prompt_messages`` that is not a non-empty list of messages (objects)."""
    rows: list[dict[str, object]] = []
    for example in examples:
        listed = _prompt_messages(example)
        messages = [m for m in listed if isinstance(m, Mapping)]
        if not messages or len(messages) != len(listed):
            raise ValueError(
                f"example {example.id!r}: prompt_messages must be a non-empty list of messages"
            )
        tagged: list[dict[str, object]] = [
            {**messages[0], EXAMPLE_ID_KEY: example.id},
            *(dict(m) for m in messages[1:]),
        ]
        rows.append({"prompt": tagged, "example_id": example.id})
    return rows


def benchmax_reward(
    prompts: Sequence[object], completions: Sequence[object], **kwargs: object
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
    return list(cast("Iterable[float | None]", rewards))  # RolloutFunc's REWARD_KEY column


@dataclass(frozen=True, slots=True)
class _Row:
    """Where one prompt of TRL's batch goes: its example, its benchmax group (an index
    into the call's groups), its rollout id and its row in TRL's generation batch."""

    example: Example[object]
    group: int
    index: int
    rollout_id: str
    batch_row: int


class RolloutFunc:
    """A ``rollout_func`` for TRL's ``GRPOTrainer`` running ``env``'s rollouts.

    ``examples`` are the examples the trainer's dataset refers to (build that dataset with
    :func:`dataset_rows`). A prompt TRL passes finds its example by id: the
    ``benchmax_example_id`` key of one of its messages, or the prompt itself when it is a
    string; else by its ``prompt_messages`` (``None``-valued keys left out). Examples may
    share a prompt; ``ValueError`` at construction when two different examples share an
    id, and when called with a prompt that names an unknown id, matches no example, or
    (untagged) matches several. Each call runs, concurrently, one benchmax group per TRL
    group of the batch (the rows of one example within a run of ``num_generations``;
    without a trainer that says, all rows of one example) through
    ``benchmax.training.collect_group``, every request asking the server for token ids and
    logprobs (``record_tokens``), against ``base_url`` (``{rollout_id}`` in it becomes the
    rollout's id, see the module docs) with ``model``; ``model_auth`` defaults to ``Bearer
    EMPTY`` (vLLM's convention for no key). ``sampling_args`` go into every request; by
    default they carry the trainer's ``temperature`` and ``top_p``. With ``seed``, every
    rollout sends its own ``seed``: ``benchmax.training.rollout_seed(seed + n, example id,
    row)`` for the ``n``-th call and the rollout's row in TRL's generation batch (a
    ``seed`` in ``sampling_args`` wins), so a server that honours seeds samples
    reproducibly whatever the request order. ``calls_done`` is where the call count starts
    (a resumed run passes the :attr:`calls_done` it saved, and gets the rollout ids and
    seeds an uninterrupted run would have used); ``ValueError`` when it is not a
    non-negative integer.

    Per prompt, in TRL's order, the call returns ``prompt_ids``, ``completion_ids``,
    ``logprobs``, ``env_mask`` (the rollout's last training sequence of
    ``rollout_sequences``, all-zero mask when not trainable; a rollout without any tokens
    becomes a one-token placeholder, the tokenizer's EOS, masked) and the extra fields
    ``benchmax_reward`` (the scalar by the environment's ``reward_weights``, ``None`` when
    not trainable), ``benchmax_rewards`` (the reward map),
    ``termination_reason``, ``rollout_id``, ``trainable``, ``token_prefix_breaks``,
    ``benchmax_branch_rows`` (the rows returned for the rollout) and
    ``benchmax_coverage`` (its sampled and trained tokens). A rollout whose calls did not
    stitch into one sequence has several branches (``benchmax.stitching``): with
    ``every_branch=True`` each of its other branches is returned as an extra row after
    the rows of all prompts (in prompt order), for
    ``benchmax.training.BranchingGRPOTrainer``, which trains them with the rollout's
    advantage (a plain ``GRPOTrainer`` cannot: it expects one row per prompt); without it
    only the last branch is returned and a warning says how many sampled tokens were left
    out (``benchmax_coverage`` counts them too). ``sequences`` replaces
    ``rollout_sequences`` (the coverage fields then count what it built).
    ``on_group(trajectories)`` is called with each group's trajectories (e.g. to log or
    keep them). Rollouts run on a private event loop thread; :meth:`close` (or ``with``)
    stops it and closes the environment. ``calls_done`` (default 0) is the number of
    calls already made by the run being resumed: the call counter starts there.

    A rollout that ends at a budget (``output_exceeded``, ``max_turns_exceeded``,
    ``tool_budget_exceeded``: an ordinary end in training) logs no WARNING; it is counted
    in :attr:`budget_ends` (all calls together) and its ``termination_reason`` says so.
    """

    def __init__(
        self,
        env: Environment[Any, Any],
        examples: Iterable[Example[object]],
        *,
        base_url: str,
        model: str,
        model_auth: ModelAuth | None = None,
        sampling_args: Mapping[str, object] | None = None,
        split: DatasetSplit = "train",
        seed: int | None = None,
        on_group: Callable[[Sequence[Trajectory]], None] | None = None,
        calls_done: int = 0,
        every_branch: bool = False,
        sequences: SequenceBuilder = rollout_sequences,
    ) -> None:
        if isinstance(calls_done, bool) or not isinstance(calls_done, int) or calls_done < 0:
            raise ValueError(f"calls_done must be a non-negative integer, got {calls_done!r}")
        self.env = env
        self.base_url = base_url
        self.model = model
        self._auth: ModelAuth = model_auth or StaticBearerAuth("EMPTY")
        self._sampling_args = None if sampling_args is None else dict(sampling_args)
        self._split: DatasetSplit = split
        self._seed = seed
        self._on_group = on_group
        self._every_branch = every_branch
        self._sequences = sequences
        self._by_prompt: dict[str, list[Example[object]]] = {}
        self._by_id: dict[str, Example[object]] = {}
        for example in examples:
            other = self._by_id.get(example.id)
            if other is not None:
                if other != example:
                    raise ValueError(f"two different examples have the id {example.id!r}")
                continue
            key = _prompt_key(_prompt_messages(example))
            self._by_prompt.setdefault(key, []).append(example)
            self._by_id[example.id] = example
        self._calls_done = calls_done
        self.budget_ends = 0
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="benchmax-trl-rollouts", daemon=True
        )
        self._thread.start()

    @property
    def calls_done(self) -> int:
        """How many calls this function has started, counting the ``calls_done`` it was
        given: the number the next call gets (save it to resume)."""
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

    def __call__(self, prompts: Sequence[object], trainer: Any) -> dict[str, list[object]]:
        """Run the rollouts for TRL's ``prompts``; the dict described in the class docs."""
        call = self._calls_done
        rows = self._rows(prompts, trainer, call)
        self._calls_done += 1
        groups: dict[int, list[_Row]] = {}
        for row in rows:
            groups.setdefault(row.group, []).append(row)
        sampling_args = self._sampling_args_for(trainer)
        requests = [
            [
                RolloutRequest(
                    rollout_id=member.rollout_id,
                    example=member.example,
                    model=self.model,
                    base_url=self.base_url.replace(ROLLOUT_ID_PLACEHOLDER, member.rollout_id),
                    model_auth=self._auth,
                    split=self._split,
                    sampling_args=self._seeded(sampling_args, call, member),
                    record_tokens=True,
                )
                for member in members
            ]
            for members in groups.values()
        ]
        quiet = _CountBudgetEnds(frozenset(r.rollout_id for group in requests for r in group))
        environment_log = logging.getLogger("benchmax.envs.environment")
        environment_log.addFilter(quiet)
        try:
            results = self._run(self._collect(requests))
        finally:
            environment_log.removeFilter(quiet)
        self.budget_ends += quiet.counted
        scalars = [group.scalar_rewards for group in results]  # once per group, not per row
        filler = _placeholder_token(trainer)
        output: dict[str, list[object]] = {
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
                BRANCH_ROWS_KEY,
                COVERAGE_KEY,
            )
        }
        extra_rows: list[RolloutSequence] = []
        left_out = [0, 0]  # rollouts, sampled tokens
        for row in rows:
            collected = results[row.group]
            trajectory = collected.trajectories[row.index]
            built = tuple(self._sequences(trajectory)) or (_placeholder(filler),)
            sequence = built[-1]
            trainable = trajectory.trainable and sequence.trainable
            returned = built if self._every_branch else built[-1:]
            extra_rows.extend(returned[:-1])
            sampled = _sampled_tokens(trajectory) if trainable else 0
            trained = sum(s.trained_tokens for s in returned) if trainable else 0
            if len(returned) < len(built) and trainable:
                left_out[0] += 1
                left_out[1] += sum(s.trained_tokens for s in built[:-1])
            _append_row(output, sequence)
            output[REWARD_KEY].append(scalars[row.group][row.index] if trainable else None)
            output["benchmax_rewards"].append(dict(trajectory.rewards))
            output["termination_reason"].append(trajectory.termination_reason)
            output["rollout_id"].append(trajectory.rollout_id)
            output["trainable"].append(trainable)
            output["token_prefix_breaks"].append(trajectory.token_prefix_breaks)
            output[BRANCH_ROWS_KEY].append(len(returned))
            output[COVERAGE_KEY].append({"sampled_tokens": sampled, "trained_tokens": trained})
        for sequence in extra_rows:
            _append_row(output, sequence)
        if left_out[0]:
            logger.warning(
                "rollout_func: %d rollout(s) had several branches and only the last of each "
                "is returned (%d sampled tokens left out); train every branch with "
                "RolloutFunc(every_branch=True) and benchmax.training.BranchingGRPOTrainer",
                *left_out,
            )
        return output

    def _rows(self, prompts: Sequence[object], trainer: Any, call: int) -> list[_Row]:
        """Each prompt's example, benchmax group, rollout id and row in TRL's batch."""
        examples = [self._example_for(prompt) for prompt in prompts]
        generations = _generations(trainer)
        offset = _process_index(trainer) * len(prompts)
        groups: dict[tuple[int, str], int] = {}
        sizes: dict[int, int] = {}
        rows: list[_Row] = []
        for position, example in enumerate(examples):
            batch_row = offset + position
            trl_group = 0 if generations is None else batch_row // generations
            group = groups.setdefault((trl_group, example.id), len(groups))
            index = sizes.get(group, 0)
            sizes[group] = index + 1
            if generations is None:  # no trainer to ask: one group per example
                rollout_id = f"trl-{call}-{group}-{index}"
            else:
                rollout_id = f"trl-{call}-{trl_group}-{batch_row % generations}"
            rows.append(_Row(example, group, index, rollout_id, batch_row))
        return rows

    def _example_for(self, prompt: object) -> Example[object]:
        if isinstance(prompt, str):
            found = self._by_id.get(prompt)
            if found is None:
                raise ValueError(f"rollout_func got the prompt {prompt!r}, which is no example id")
            return found
        tagged = _tagged_id(prompt)
        if tagged is not None:
            found = self._by_id.get(tagged)
            if found is None:
                raise ValueError(
                    f"rollout_func got a prompt tagged with example id {tagged!r}, "
                    "which is not among the examples given to RolloutFunc"
                )
            return found
        try:
            matches = self._by_prompt.get(_prompt_key(prompt), [])
        except ValueError:
            matches = []
        if not matches:
            raise ValueError(
                "rollout_func got a prompt that matches no example's prompt_messages "
                "(build the trainer's dataset with benchmax.integrations.trl.dataset_rows)"
            )
        if len(matches) > 1:
            names = ", ".join(repr(example.id) for example in matches)
            raise ValueError(
                f"rollout_func got a prompt shared by examples {names} without an example "
                f"id: build the trainer's dataset with dataset_rows (it puts "
                f"{EXAMPLE_ID_KEY!r} into the prompt) or add that key to a message yourself"
            )
        return matches[0]

    def _sampling_args_for(self, trainer: Any) -> dict[str, object]:
        if self._sampling_args is not None:
            return dict(self._sampling_args)
        args = getattr(trainer, "args", None)
        chosen: dict[str, object] = {}
        for name in ("temperature", "top_p"):
            value = getattr(args, name, None)
            if isinstance(value, int | float) and not isinstance(value, bool):
                chosen[name] = float(value)
        return chosen

    def _seeded(self, sampling_args: dict[str, object], call: int, row: _Row) -> dict[str, object]:
        if self._seed is None or "seed" in sampling_args:
            return sampling_args
        seed = rollout_seed(self._seed + call, row.example.id, row.batch_row)
        return {**sampling_args, "seed": seed}

    async def _collect(
        self, groups: Sequence[Sequence[RolloutRequest[object]]]
    ) -> list[TrajectoryGroup]:
        collected: dict[int, TrajectoryGroup] = {}

        async def one(index: int) -> None:
            collected[index] = await collect_group(self.env, groups[index])
            if self._on_group is not None:
                self._on_group(collected[index].trajectories)

        await run_pool(range(len(groups)), one, concurrency=max(len(groups), 1))
        return [collected[index] for index in range(len(groups))]

    def _run[T](self, coroutine: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result()


def _prompt_messages(example: Example[object]) -> list[object]:
    """The example's ``prompt_messages``; for a payload that has none (an ``AgentEnv``'s
    task: any JSON, handed to a program), one user message holding the payload as JSON,
    so TRL has a prompt row to carry its id."""
    payload = example.payload
    if not isinstance(payload, Mapping) or "prompt_messages" not in payload:
        text = json.dumps(payload, sort_keys=True, default=str)
        return [{"role": "user", "content": text}]
    prompt = payload.get("prompt_messages")
    if not isinstance(prompt, list):
        raise ValueError(f"example {example.id!r} has no prompt_messages list")
    return prompt


def _prompt_key(messages: object) -> str:
    """The identity of a prompt's messages, ``None``-valued keys and the id tag left out
    (what Arrow adds to a dataset's messages)."""
    return canonical_example_id(_without_none(messages))


def _without_none(value: object) -> object:
    if isinstance(value, Mapping):
        return {
            key: _without_none(item)
            for key, item in value.items()
            if item is not None and key != EXAMPLE_ID_KEY
        }
    if isinstance(value, list | tuple):
        return [_without_none(item) for item in value]
    return value


def _tagged_id(prompt: object) -> str | None:
    """The example id a prompt carries under ``benchmax_example_id``, if any."""
    if not isinstance(prompt, list | tuple):
        return None
    for message in prompt:
        if isinstance(message, Mapping):
            value = message.get(EXAMPLE_ID_KEY)
            if isinstance(value, str) and value:
                return value
    return None


def _generations(trainer: Any) -> int | None:
    """How many rows of TRL's generation batch make one group (``num_generations``, or
    ``num_generations_eval`` while the model is in eval mode); ``None`` when unknown."""
    training = getattr(getattr(trainer, "model", None), "training", True)
    value = None if training else getattr(trainer, "num_generations_eval", None)
    if value is None:
        value = getattr(trainer, "num_generations", None)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        return None
    return value


def _process_index(trainer: Any) -> int:
    """This process's index in the trainer's accelerator (0 without one)."""
    value = getattr(getattr(trainer, "accelerator", None), "process_index", 0)
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _append_row(output: dict[str, list[object]], sequence: RolloutSequence) -> None:
    output["prompt_ids"].append(list(sequence.prompt_ids))
    output["completion_ids"].append(list(sequence.completion_ids))
    output["logprobs"].append(list(sequence.completion_logprobs))
    output["env_mask"].append(list(sequence.completion_mask))


def _sampled_tokens(trajectory: Trajectory) -> int:
    coverage = trajectory.coverage
    return 0 if coverage is None else coverage.sampled_tokens


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
