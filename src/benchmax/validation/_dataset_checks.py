"""Checks of each dataset split: loads, non-empty, ids unique and stable, JSON, prompts."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from benchmax.agents import AgentEnv
from benchmax.envs.base import BaseEnv
from benchmax.envs.environment import Environment
from benchmax.envs.shared_types import DatasetSplit, Example
from benchmax.validation._shapes import prompt_message_problems
from benchmax.validation._state import Split, Validation, error_text, listed

__all__ = ["check_split"]


async def _load(
    validation: Validation, env: Environment[Any, Any], split: DatasetSplit
) -> list[Example[object]]:
    dataset = await env.create_dataset(split, validation.config.base_dir)
    examples = list(dataset)
    for index, example in enumerate(examples):
        if not isinstance(example, Example):
            raise TypeError(
                f"item {index} of the dataset is a {type(example).__name__}, not an Example"
            )
    return examples


async def check_split(
    validation: Validation, env: Environment[Any, Any], split: DatasetSplit
) -> Split | None:
    name = f"dataset {split}"
    try:
        examples = await _load(validation, env, split)
    except FileNotFoundError as error:
        validation.add(name, "skipped", f"no {split} data: {error.filename or error}")
        return None
    except Exception as error:
        validation.add(
            f"{name}: loads",
            "failed",
            f"create_dataset({split!r}, {validation.config.base_dir}) raised {error_text(error)}",
        )
        return None
    if not examples:
        validation.add(
            f"{name}: loads",
            "failed",
            f"the {split} split is empty: add examples to it or remove its file",
        )
        return None
    validation.add(f"{name}: loads", "passed", f"{len(examples)} examples")
    ids = [example.id for example in examples]
    repeated = sorted(i for i, n in Counter(ids).items() if n > 1)
    if repeated:
        validation.add(
            f"{name}: ids unique",
            "failed",
            f"{len(repeated)} ids repeat ({listed(repeated)}): derive each id from "
            "the example's content, e.g. canonical_example_id(payload), and drop duplicates",
        )
    else:
        validation.add(f"{name}: ids unique", "passed", f"{len(ids)} distinct ids")
    await _check_stable(validation, env, split, ids)
    _check_json(validation, split, examples)
    if isinstance(env, BaseEnv) and not isinstance(env, AgentEnv):  # agents take any JSON
        _check_prompts(validation, split, examples)
    return Split(split, examples)


async def _check_stable(
    validation: Validation, env: Environment[Any, Any], split: DatasetSplit, ids: list[str]
) -> None:
    name = f"dataset {split}: ids stable"
    try:
        again = [example.id for example in await _load(validation, env, split)]
    except Exception as error:
        validation.add(name, "failed", f"loading the split again raised {error_text(error)}")
        return
    if again == ids:
        validation.add(name, "passed", "a second load gives the same ids in the same order")
        return
    first = next(
        (i for i, (a, b) in enumerate(zip(ids, again, strict=False)) if a != b),
        min(len(ids), len(again)),
    )
    validation.add(
        name,
        "failed",
        f"a second load differs from example {first} on ({len(ids)} vs {len(again)} "
        "examples): ids must not depend on randomness, time or iteration order; derive "
        "them from content (canonical_example_id) and keep the order fixed",
    )


def _check_json(
    validation: Validation, split: DatasetSplit, examples: list[Example[object]]
) -> None:
    bad: list[str] = []
    for index, example in enumerate(examples):
        try:
            json.dumps(example.payload, allow_nan=False)
        except (TypeError, ValueError) as error:
            bad.append(f"example {index} ({example.id}): {error}")
    if bad:
        validation.add(
            f"dataset {split}: payloads JSON",
            "failed",
            f"{len(bad)} payloads are not JSON-serializable ({listed(bad)}): keep payloads "
            "to dicts, lists, strings, finite numbers, booleans and null",
        )
    else:
        validation.add(f"dataset {split}: payloads JSON", "passed", "every payload serializes")


def _check_prompts(
    validation: Validation, split: DatasetSplit, examples: list[Example[object]]
) -> None:
    bad: list[str] = []
    for index, example in enumerate(examples):
        problems = prompt_message_problems(example.payload)
        if problems:
            bad.append(f"example {index}: {problems[0]}")
    if bad:
        validation.add(
            f"dataset {split}: prompt_messages",
            "failed",
            f"{len(bad)} examples have malformed prompt_messages ({listed(bad)})",
        )
    else:
        validation.add(
            f"dataset {split}: prompt_messages",
            "passed",
            "every example has well-formed chat messages",
        )
