"""Capturing a Harbor trial's model calls (``HarborEnv(capture_calls=True)``).

The trial's agent is pointed at a capture session of the running loop's endpoint
(``benchmax.capture.loop_endpoint``) instead of the upstream: it gets the session's base URL
and key (never the upstream's credential), every call it makes is recorded with exact
token ids and logprobs, and when a runner observes rollouts the calls become the rollout's
``model_calls``. The agent may name the model as Harbor and LiteLLM spell it
(``openai/<model>``), so the session does not check the model name. A failure the capture
saw first (an upstream that gives no tokens, a failed upstream call) settles the trial
with that reason and zero rewards.

The endpoint listens on 127.0.0.1 by default; an agent in a sandbox that cannot reach the
host's loopback (a Docker container) is served by an endpoint on the environment's
``CaptureAddress`` instead (``capture_bind``, and ``capture_host`` in the URL it is given).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from benchmax._observer import observing, report_rollout
from benchmax._vocabulary import FINISHED
from benchmax.capture import CaptureAddress
from benchmax.envs.agent import AgentEndpoint
from benchmax.envs.shared_types import RolloutAttempt, RolloutRequest
from benchmax.trajectory import Trajectory

__all__ = ["AgentEndpoint", "captured_trial"]

type Trial = Callable[[RolloutRequest[Any], AgentEndpoint], Awaitable[RolloutAttempt]]


async def captured_trial(
    request: RolloutRequest[Any],
    run_trial: Trial,
    reward_keys: Sequence[str],
    address: CaptureAddress,
) -> RolloutAttempt:
    """``run_trial(request, endpoint)`` with the agent's calls captured by the loop's
    endpoint for ``address`` (module docstring)."""
    from benchmax.capture import loop_endpoint

    async with loop_endpoint(address) as endpoint:
        session = endpoint.open_session(
            rollout_id=request.rollout_id,
            model=None,
            upstream_url=request.base_url,
            upstream_auth=request.model_auth,
            sampling_args=request.sampling_args,
        )
        try:
            attempt = await run_trial(
                request,
                AgentEndpoint(
                    base_url=session.base_url,
                    api_key=session.api_key,
                    model=request.model,
                    ended=session.ended,
                ),
            )
        finally:
            await endpoint.close_session(session)
    failure = session.failure
    if failure is not None and attempt.termination_reason == FINISHED:
        attempt = RolloutAttempt(
            rollout_id=attempt.rollout_id,
            termination_reason=failure.termination_reason,
            rewards=dict.fromkeys(reward_keys, 0.0),
        )
    if observing():
        calls = session.calls
        report_rollout(
            Trajectory(
                rollout_id=request.rollout_id,
                example_id=request.example.id,
                termination_reason=attempt.termination_reason,
                rewards=attempt.rewards or {},
                split=request.split,
                model_calls=tuple(call.model_call() for call in calls),
                timings={"model_seconds": round(sum(c.seconds for c in calls), 6)},
            )
        )
    return attempt
