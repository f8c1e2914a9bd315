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

How a prompt finds its example: TRL hands ``rollout_func`` only the rows' ``prompt``
column (deep-copied; the other columns reach the reward functions, not ``rollout_func``),
so :func:`dataset_rows` carries each example's id inside its prompt: the first message
gets an extra key ``benchmax_example_id`` (chat templates ignore unknown message keys, and
:class:`RolloutFunc` never sends TRL's copy of the prompt to the model). A hand-written
dataset does the same: put ``"benchmax_example_id": example.id`` into any message of the
prompt, or use the id itself as the prompt (a string). Prompts without the key are matched
by their messages, keys whose value is ``None`` left out (Arrow adds ``name: None`` and
the other keys any message of the column has).

Rollout ids and seeds follow each row's place in TRL's whole generation batch (process
``p`` of the trainer's accelerator holds rows ``p * len(prompts)`` onward; TRL's groups are
the runs of ``num_generations`` rows): row ``r`` of the ``n``-th call is rollout
``trl-<n>-<r // num_generations>-<r % num_generations>`` with seed ``rollout_seed(seed + n,
example id, r)``, so the halves of a group that TRL split across processes never share an
id or a seed, and the same batch gets the same ids and seeds on any number of processes.

A rollout whose model calls did not stitch into one sequence (a chat template that
re-renders earlier turns, an agent that edits its history, parallel subagents, retries)
has several branches (``benchmax.stitching``). ``GRPOTrainer`` wants one row per prompt,
so by default only the last branch is returned (and a warning counts the tokens left
out); ``RolloutFunc(..., every_branch=True)`` with :class:`BranchingGRPOTrainer` (the
``GRPOTrainer`` subclass ``benchmax train`` uses) trains every branch as its own row with
the rollout's advantage, the group statistics still seeing one reward per rollout.

A non-trainable rollout (``Trajectory.trainable`` false: ``model_error``, timeouts,
``context_exceeded`` and the other operational failures) never teaches the model: all of
its ``env_mask`` is 0 (none of its tokens enters the loss) *and* :func:`benchmax_reward`
returns ``None`` for it, so it does not move its siblings' baseline either.
"""

from typing import TYPE_CHECKING, Any

from benchmax._lazy_names import lazy_attribute
from benchmax.training._trl_rollouts import (
    RolloutFunc,
    benchmax_reward,
    dataset_rows,
    load_examples,
)

if TYPE_CHECKING:
    from benchmax.training import BranchingGRPOTrainer

__all__ = [
    "BranchingGRPOTrainer",
    "RolloutFunc",
    "benchmax_reward",
    "dataset_rows",
    "load_examples",
]


def __getattr__(name: str) -> Any:
    """``BranchingGRPOTrainer`` (it imports TRL), imported on first use."""
    return lazy_attribute(globals(), {"BranchingGRPOTrainer": "benchmax.training"}, name)
