"""Train and evaluate agent programs you did not write.

``AgentEnv`` (a ``BaseEnv``) runs, per rollout, a program (``command``: any language) or
an async Python callable (``run_agent``) against a capture endpoint
(``benchmax.capture``) that records every model call's exact token ids and logprobs. The
program gets the example's payload as JSON on stdin and ``OPENAI_BASE_URL``,
``OPENAI_API_KEY`` and ``OPENAI_MODEL`` in its environment; ``compute_reward(rollout)``
reads ``rollout.agent`` (``exit_code``, ``stdout``, ``stderr``, ``workdir``, ``calls``).
See docs/agents.md ("Training agents you didn't write").
"""

# The names live in benchmax.envs.agent (floor: envs); this package is their public face.
from benchmax.envs.agent import *  # noqa: F403
from benchmax.envs.agent import __all__ as __all__
