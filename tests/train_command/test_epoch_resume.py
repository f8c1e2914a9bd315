"""A resume across an epoch boundary equals the uninterrupted run: the same examples in
the same order, rollout ids, seeds, sampled tokens and final weights.

Four training examples and two prompts per step make an epoch two steps long. The
uninterrupted run trains 5 steps (epochs 0, 1 and half of 2); the other stops after step 3
(inside epoch 1) and is resumed to step 5. TRL's ``RepeatSampler`` has no ``set_epoch``:
without ``_epoch_order`` the resumed run replays epoch 0's shuffle in epochs 1 and 2.
Run with ``uv run --group trl pytest -m train``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("trl")

from safetensors.torch import load_file
from tests.train_command.test_benchmax_train import benchmax_train, settings
from tests.trl_training.tiny_policy import build_model, build_tokenizer

from benchmax.training import read_trajectories

pytestmark = pytest.mark.train

STEPS = 5
STOP_AT = 3
# Seed 0 shuffles the 4 examples into other pairs in each of epochs 0, 1 and 2.
EPOCH = ("--max-examples", "4", "--eval-examples", "1", "--seed", "0")


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("tiny-model")
    tokenizer = build_tokenizer()
    build_model(tokenizer).save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


def rollouts(run: Path) -> dict[str, tuple[str, tuple[tuple[int, ...], ...]]]:
    """Each rollout id's example and the ids of its model calls (prompt and completion)."""
    found: dict[str, tuple[str, tuple[tuple[int, ...], ...]]] = {}
    for trajectory in read_trajectories(run / "rollouts.jsonl"):
        calls = tuple(
            (*(call.prompt_token_ids or ()), -1, *(call.completion_token_ids or ()))
            for call in trajectory.model_calls
        )
        found[trajectory.rollout_id] = (trajectory.example_id, calls)
    return found


def test_a_resume_across_an_epoch_boundary_equals_the_uninterrupted_run(
    tiny_model: Path, tmp_path: Path
) -> None:
    whole = tmp_path / "whole"
    done = benchmax_train(*settings(tiny_model, whole, "--steps", str(STEPS), *EPOCH))
    assert done.returncode == 0, done.stderr[-3000:]
    parts = tmp_path / "parts"
    first = benchmax_train(*settings(tiny_model, parts, "--steps", str(STOP_AT), *EPOCH))
    assert first.returncode == 0, first.stderr[-3000:]
    again = benchmax_train(
        "--config", str(parts / "config.toml"), "--resume", "--steps", str(STEPS)
    )
    assert again.returncode == 0, again.stderr[-3000:]

    expected, resumed = rollouts(whole), rollouts(parts)
    assert len(expected) == STEPS * 2 * 2  # steps x prompts x group size
    # Epochs 1 and 2 draw other orders than epoch 0 (else this test would prove nothing).
    by_step = [{expected[f"trl-{step}-{g}-0"][0] for g in (0, 1)} for step in range(STEPS)]
    assert by_step[2] != by_step[0] and by_step[3] != by_step[1] and by_step[4] != by_step[0]
    assert resumed == expected  # examples, ids (so seeds) and every token
    final = f"checkpoints/step-{STEPS}/model.safetensors"
    weights, resumed_weights = load_file(whole / final), load_file(parts / final)
    assert weights.keys() == resumed_weights.keys()
    for name, tensor in weights.items():
        assert tensor.equal(resumed_weights[name]), name
