"""What a trainer needs from benchmax: trajectories, training samples and advantages.

- ``collect_group(env, requests)`` runs one group and returns its outcomes with the
  trajectories (``benchmax.trajectory.Trajectory``), no file involved;
  ``run_environment(..., on_group=...)`` does the same for a whole split, and
  ``read_trajectories(path)`` reads them back from a results file.
- ``to_training_samples(trajectory)`` stitches a trajectory's recorded token ids and
  logprobs into samples ``{prompt_ids, completion_ids, completion_mask,
  completion_logprobs}``.
- ``scalar_reward`` turns a reward map into one number by the environment's
  ``reward_weights``; ``group_advantages`` turns a group's scalars into advantages
  (GRPO, Dr. GRPO, RLOO).
- ``train(TrainConfig(...), EnvClass)`` runs GRPO with TRL (the ``trl`` extra) into a
  run directory that ``benchmax show``/``view``/``compare`` read (``benchmax train`` is
  the same from the command line; ``docs/training.md``).
- ``TRAINABLE_REASONS`` lists the termination reasons a trainer should learn from
  (``Trajectory.trainable``); ``rollout_seed`` derives a rollout's sampling seed.
"""

from benchmax._vocabulary import TRAINABLE_REASONS
from benchmax.runner import rollout_seed
from benchmax.training._advantages import AdvantageMethod, group_advantages, scalar_reward
from benchmax.training._collect import CollectedGroup, collect_group, read_trajectories
from benchmax.training._config import ConfigError, TrainConfig
from benchmax.training._run_files import read_metrics
from benchmax.training._samples import TrainingSample, to_training_samples
from benchmax.training._trainer import StopRequest, TrainError, TrainEvent, TrainResult, train

__all__ = [
    "TRAINABLE_REASONS",
    "AdvantageMethod",
    "CollectedGroup",
    "ConfigError",
    "StopRequest",
    "TrainConfig",
    "TrainError",
    "TrainEvent",
    "TrainResult",
    "TrainingSample",
    "collect_group",
    "group_advantages",
    "read_metrics",
    "read_trajectories",
    "rollout_seed",
    "scalar_reward",
    "to_training_samples",
    "train",
]
