"""Adapters from benchmax rollouts to trainers' own inputs.

Each submodule is imported on its own and none imports a trainer or ``torch``:

* :mod:`benchmax.integrations.trl` - a ``rollout_func`` and a reward function for TRL's
  ``GRPOTrainer`` (install ``benchmax[trl]`` for TRL itself);
* :mod:`benchmax.integrations.verl` - verl ``AgentLoopOutput`` fields;
* :mod:`benchmax.integrations.skyrl` - SkyRL ``GeneratorOutput`` fields;
* :mod:`benchmax.integrations.atropos` - Atropos ``ScoredDataGroup`` fields.
"""
