"""``score_replies``: score fixed replies (a production model's, say) to a split's examples.

The replies are written as a results file of one rollout per example (the example's
prompt and the reply as the transcript) with the results writer, and that file is
scored by ``rescore_results``: the environment's own reward hooks, settled as in a run.
No policy model is called.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmax.auth import ModelAuth
from benchmax.envs import BaseEnv
from benchmax.envs.shared_types import FINISHED, DatasetSplit
from benchmax.results import ResultsStore, RunDefinition, RunError, TrajectoryGroup
from benchmax.runner._rescore import RescoreReport, rescore_results
from benchmax.trajectory import Trajectory

__all__ = ["FixedReply", "score_replies"]


@dataclass(frozen=True, slots=True)
class FixedReply:
    """An assistant ``message`` answering one example; ``history`` is the conversation it
    answered, used when the example's payload has no ``prompt_messages``."""

    message: Mapping[str, Any]
    history: Sequence[Mapping[str, Any]] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.message, Mapping) or self.message.get("role") != "assistant":
            raise ValueError("a fixed reply must be an assistant message")


async def score_replies(
    env: BaseEnv,
    replies: Iterable[FixedReply],
    output: str | Path,
    *,
    base_dir: str | Path,
    split: DatasetSplit = "eval",
    model: str = "fixed-replies",
    unscored: str | Path | None = None,
    env_definition: Mapping[str, Any] | None = None,
    auth_providers: Mapping[str, ModelAuth] | None = None,
    max_concurrent_groups: int = 8,
) -> RescoreReport:
    """Score ``replies`` (one per example of ``split``, in dataset order) with ``env``'s
    reward hooks and write them to ``output``, a results file (group size 1, the header's
    ``model`` as given) that ``view``, ``show`` and ``compare`` read.

    Example ``i`` of ``env.create_dataset(split, base_dir)`` gets reply ``i`` after the
    example's ``prompt_messages`` (the reply's ``history`` when the payload has none).
    The unscored file is written to ``unscored`` (default: ``.NAME-unscored.jsonl``
    beside ``output``) and kept: it is the rescore's source. Judges use
    ``auth_providers``.

    Raises ``RunError`` when the split cannot be loaded or the number of replies differs
    from its examples, and what ``rescore_results`` raises.
    """
    target = Path(output)
    data = Path(base_dir)
    source = (
        Path(unscored)
        if unscored is not None
        else target.with_name(f".{target.stem}-unscored.jsonl")
    )
    try:
        examples = list(await env.create_dataset(split, data))
    except FileNotFoundError as error:
        raise RunError(f"data file not found: {error.filename or error}") from error
    except Exception as error:
        raise RunError(
            f"cannot load the {split} split from {data}: {type(error).__name__}: {error}"
        ) from error
    source.unlink(missing_ok=True)
    definition = {
        "env": dict(env_definition or {"class": type(env).__qualname__}),
        "model": model,
        "split": split,
        "group_size": 1,
        "replies": "fixed",
    }
    store = ResultsStore.open(source, RunDefinition(definition), force=True)
    count = 0
    try:
        for reply in replies:
            if count < len(examples):
                store.append(_group(store.run_id, split, env, count, examples[count], reply))
            count += 1
    finally:
        store.close()
    if count != len(examples):
        raise RunError(
            f"{count} replies for the {len(examples)} examples of {type(env).__name__}'s "
            f"{split} split under {data}; they are paired in order"
        )
    return await rescore_results(
        env,
        source,
        target,
        base_dir=data,
        env_definition=env_definition,
        auth_providers=auth_providers,
        max_concurrent_groups=max_concurrent_groups,
    )


def _group(
    run_id: str, split: str, env: BaseEnv, index: int, example: Any, reply: FixedReply
) -> TrajectoryGroup:
    payload = example.payload
    if isinstance(payload, Mapping) and isinstance(payload.get("prompt_messages"), list):
        history = list(payload["prompt_messages"])
    else:
        history = [dict(message) for message in reply.history]
    rewards = dict.fromkeys(env.reward_keys, 0.0)
    record = Trajectory(
        rollout_id=f"{run_id}-{index}-0",
        example_id=example.id,
        termination_reason=FINISHED,
        rewards=rewards,
        run_id=run_id,
        split=split,
        example_index=index,
        group_index=0,
        messages=(*history, dict(reply.message)),
    )
    return TrajectoryGroup((record,))
