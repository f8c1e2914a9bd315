"""What a trainer needs from benchmax: trajectories, training samples and advantages.

- ``collect_group(env, requests)`` runs one group and returns it as a
  ``benchmax.results.TrajectoryGroup`` (its ``Trajectory`` records, outcomes, scalars
  and advantages), no file involved (``CollectedGroup``, its old name, is a deprecated
  alias until 0.3);
  ``run_environment(..., on_group=...)`` does the same for a whole split, and
  ``read_trajectories(path)`` reads them back from a results file.
- ``to_training_samples(trajectory)`` stitches a trajectory's recorded token ids and
  logprobs into samples ``{prompt_ids, completion_ids, completion_mask,
  completion_logprobs}``.
- ``scalar_reward`` turns a reward map into one number by the environment's
  ``reward_weights``; ``group_advantages`` turns a group's scalars into advantages
  (GRPO, Dr. GRPO, RLOO); both are ``benchmax.results``' own, re-exported here.
  ``rollout_sequences`` gives a trajectory's training sequences (``RolloutSequence``), one
  per branch of its model calls (``Branch``, ``stitch_branches``: calls that extend no
  chain begin a branch), the rule every trainer adapter shares; ``TokenCoverage`` counts
  the sampled tokens they hold (all of ``benchmax.stitching``, re-exported here).
- ``train(TrainConfig(...), EnvClass)`` runs GRPO with TRL (the ``trl`` extra) into a
  run directory that ``benchmax show``/``view``/``compare`` read (``benchmax train`` is
  the same from the command line; ``docs/training.md``).
- ``TRAINABLE_REASONS`` lists the termination reasons a trainer should learn from
  (``Trajectory.trainable``); ``rollout_seed`` derives a rollout's sampling seed.
- ``PolicySampler(model, tokenizer)`` serves a live ``transformers`` model over an
  OpenAI-compatible endpoint with exact tokens, batching the requests in flight;
  ``load_model(spec)`` / ``resolve_model(spec)`` take a model directory, a PEFT adapter,
  a built-in name (``BUILTIN_MODELS``) or a Hub id (the ``trl`` extra; these names are
  imported on first use, so ``import benchmax.training`` needs neither torch nor aiohttp).
"""

from typing import TYPE_CHECKING, Any

from benchmax._lazy_names import lazy_attribute, moved_attribute
from benchmax._vocabulary import TRAINABLE_REASONS
from benchmax.results import (
    AdvantageMethod,
    group_advantages,
    read_metrics,
    read_trajectories,
    scalar_reward,
)
from benchmax.runner import rollout_seed
from benchmax.stitching import Branch, BranchCoverage, BranchStart, TokenCoverage, stitch_branches
from benchmax.training._collect import collect_group
from benchmax.training._config import ConfigError, TrainConfig
from benchmax.training._errors import TrainingError
from benchmax.training._rollout_sequence import (
    RolloutSequence,
    rollout_sequence,
    rollout_sequences,
)
from benchmax.training._samples import TrainingSample, to_training_samples
from benchmax.training._trainer import StopRequest, TrainError, TrainEvent, TrainResult, train

if TYPE_CHECKING:
    from benchmax.training._branching_trainer import BranchingGRPOTrainer
    from benchmax.training._models import BUILTIN_MODELS, load_model, resolve_model
    from benchmax.training._sampler import PolicySampler

__all__ = [
    "BUILTIN_MODELS",
    "TRAINABLE_REASONS",
    "BranchingGRPOTrainer",
    "AdvantageMethod",
    "Branch",
    "BranchCoverage",
    "BranchStart",
    "ConfigError",
    "PolicySampler",
    "RolloutSequence",
    "StopRequest",
    "TokenCoverage",
    "TrainConfig",
    "TrainError",
    "TrainEvent",
    "TrainResult",
    "TrainingError",
    "TrainingSample",
    "collect_group",
    "group_advantages",
    "load_model",
    "read_metrics",
    "read_trajectories",
    "resolve_model",
    "rollout_seed",
    "rollout_sequence",
    "rollout_sequences",
    "scalar_reward",
    "stitch_branches",
    "to_training_samples",
    "train",
]

_LAZY = {
    "BranchingGRPOTrainer": "benchmax.training._branching_trainer",
    "PolicySampler": "benchmax.training._sampler",
    "BUILTIN_MODELS": "benchmax.training._models",
    "load_model": "benchmax.training._models",
    "resolve_model": "benchmax.training._models",
}


_MOVED = {"CollectedGroup": ("benchmax.results", "TrajectoryGroup")}


def __getattr__(name: str) -> Any:
    """The names that need the ``trl`` extra, imported on first use; ``CollectedGroup``,
    the old name of ``benchmax.results.TrajectoryGroup`` (deprecated, gone in 0.3)."""
    if name in _MOVED:
        return moved_attribute(globals(), _MOVED, name)
    return lazy_attribute(globals(), _LAZY, name)
