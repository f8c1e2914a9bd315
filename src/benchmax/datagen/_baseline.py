"""The production model's baseline: its logged replies to the eval split, scored by an env.

The logged replies go to ``benchmax.runner.score_replies``, which writes them as a
results file and scores it through ``rescore_results`` with the environment's own reward
hooks. No policy model is called.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import cast

import orjson

from benchmax.auth import ModelAuth
from benchmax.envs import BaseEnv
from benchmax.runner import FixedReply, RescoreReport, score_replies

__all__ = ["BASELINE_NAME", "LOGGED_NAME", "score_logged_replies"]

BASELINE_NAME = "baseline.jsonl"
LOGGED_NAME = ".baseline-logged.jsonl"
"""The unscored results file of logged replies that the baseline is scored from."""


def _fixed_reply(row: Mapping[str, object]) -> FixedReply:
    relabeled = row.get("relabeled")
    text = (
        relabeled["logged_ground_truth"]
        if isinstance(relabeled, Mapping) and "logged_ground_truth" in relabeled
        else row.get("ground_truth", "")
    )
    message: dict[str, object] = {"role": "assistant", "content": str(text)}
    if row.get("tool_calls"):
        message["tool_calls"] = row["tool_calls"]
    history = row.get("messages")
    if not isinstance(history, list):
        history = [{"role": "user", "content": str(row.get("prompt", ""))}]
    return FixedReply(message, tuple(history))


def _rows(path: Path) -> Iterator[dict[str, object]]:
    with path.open("rb") as file:
        for line in file:
            if line.strip():
                yield orjson.loads(line)


def _models(path: Path) -> str:
    models: dict[str, None] = {}
    for row in _rows(path):
        model = cast("Mapping[str, object]", row.get("source") or {}).get("model")
        if isinstance(model, str):
            models.setdefault(model, None)
    return ",".join(models) or "logged"


async def score_logged_replies(
    env: BaseEnv,
    data_dir: str | Path,
    output: str | Path | None = None,
    *,
    env_definition: Mapping[str, object] | None = None,
    auth_providers: Mapping[str, ModelAuth] | None = None,
    max_concurrent_groups: int = 8,
) -> RescoreReport:
    """Score the logged replies of ``data_dir/eval.jsonl`` (rows ``traces`` wrote) with
    ``env``'s rewards; write them to ``output`` (default ``data_dir/baseline.jsonl``), a
    results file that ``view``, ``show`` and ``compare`` read.

    ``env.create_dataset("eval", data_dir)`` must give one example per row, in order (as
    ``JsonlDataset`` does): example ``i`` gets row ``i``'s logged reply (the logged one
    when the row was relabeled) after its ``prompt_messages``. The header's ``model``
    names the logged models; the unscored source is kept as
    ``data_dir/.baseline-logged.jsonl``. Judges the rewards call use ``auth_providers``.
    Raises what ``benchmax.runner.score_replies`` raises.
    """
    data = Path(data_dir)
    rows = data / "eval.jsonl"
    return await score_replies(
        env,
        (_fixed_reply(row) for row in _rows(rows)),
        Path(output) if output is not None else data / BASELINE_NAME,
        base_dir=data,
        split="eval",
        model=_models(rows),
        unscored=data / LOGGED_NAME,
        env_definition=env_definition,
        auth_providers=auth_providers,
        max_concurrent_groups=max_concurrent_groups,
    )
