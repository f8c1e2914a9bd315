"""A mock policy for ``benchmax.sources.reasoning_gym:ReasoningGymEnv`` on arithmetic tasks."""
