"""The base the sources share (``benchmax.sources._base``): process-bound state kept out
of pickles, seeded splits, the payload's source record and the prompt."""

from __future__ import annotations

import pickle
import threading
from pathlib import Path

import pytest

from benchmax.envs import DatasetSplit, Example, JsonRow
from benchmax.sources._base import EVAL_SEED_OFFSET, SeededSourceEnv


class _CountingEnv(SeededSourceEnv):
    reward_keys = ("score",)
    source_name = "CountingEnv"
    payload_key = "counting"
    process_local = ("_lock",)

    def __init__(self, size: object, eval_size: object = None, seed: object = 0) -> None:
        super().__init__()
        self._set_seeded_splits(size, eval_size, seed, names=("size", "eval_size"))
        self._start_process_state()

    def _start_process_state(self) -> None:
        self._lock = threading.Lock()

    def _examples(self, split: DatasetSplit, max_examples: int | None) -> list[Example[JsonRow]]:
        _, count = self._split_count(split, max_examples)
        first = self.split_seed(split)
        return [
            Example(
                id=str(first + index),
                payload={"prompt_messages": self._prompt("", str(first + index))},
            )
            for index in range(count)
        ]


def test_process_local_state_is_made_again_where_the_env_is_unpickled() -> None:
    env = _CountingEnv(3, seed=5)
    copy = pickle.loads(pickle.dumps(env))
    assert copy._lock is not env._lock
    assert (copy.seed, copy._split_sizes) == (5, {"train": 3, "eval": 3})


async def test_the_splits_are_seeded_apart_and_capped(tmp_path: Path) -> None:
    env = _CountingEnv(3, eval_size=2, seed=5)
    train = [example.id for example in await env.create_dataset("train", tmp_path)]
    (evaluation,) = list(await env.create_dataset("eval", tmp_path, max_examples=1))
    assert train == ["5", "6", "7"]
    assert evaluation.id == str(5 + EVAL_SEED_OFFSET)
    assert evaluation.payload["prompt_messages"] == [
        {"role": "user", "content": str(5 + EVAL_SEED_OFFSET)}
    ]


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"size": 0}, "CountingEnv size must be an integer from 1 to"),
        ({"size": 1, "eval_size": EVAL_SEED_OFFSET}, "CountingEnv eval_size must be an integer"),
        ({"size": 1, "seed": -1}, "CountingEnv seed must be a non-negative integer, not -1"),
    ],
)
def test_a_bad_split_argument_names_the_source_and_the_argument(
    arguments: dict[str, object], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        _CountingEnv(**arguments)


def test_the_source_record_and_the_prompt() -> None:
    env = _CountingEnv(1)
    assert env._source_record({"counting": {"index": 1}}) == {"index": 1}
    assert env._source_record({"counting": [1]}) is None
    assert env._source_record({}) is None
    with pytest.raises(TypeError, match="CountingEnv system_prompt must be a string or None"):
        env._checked_text("system_prompt", 3)
    assert env._prompt("Be brief.", "2+2?") == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "2+2?"},
    ]
