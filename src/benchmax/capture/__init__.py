"""Capture: record the exact tokens of every model call a program you did not write makes.

``CaptureEndpoint`` is an OpenAI-compatible chat-completions server (127.0.0.1 by default)
in front of an upstream (a ``--base-url`` server, vLLM, SGLang, the embedded mock model,
``benchmax train``'s sampler). Each rollout gets a ``CaptureSession``: its own base URL
(``http://HOST:PORT/rollouts/<rollout id>/v1``) and API key (a program that cannot change
paths is attributed by its key at ``http://HOST:PORT/v1``), while the upstream's real
credential stays with the endpoint. For each call the upstream is asked, without
streaming, for the prompt ids, completion ids and logprobs (the fields ``--tokens`` asks
for); the request, the reply, the tokens and the weights version are recorded as a
``CapturedCall`` (``CapturedCall.model_call()`` is the rollout record's ``ModelCall``),
and the program gets the reply, as an event stream when it asked to stream. An upstream
that cannot give exact tokens is refused in one line (HTTP 502 ``tokens_unavailable``).

``benchmax.agents.AgentEnv`` runs a program per rollout through it; ``benchmax capture
--upstream URL`` runs it alone; ``loop_endpoint()`` is the running event loop's shared
endpoint (started for the first rollout in flight, stopped after the last), for a
``CaptureAddress`` (where it listens, and the host its URLs name). See docs/agents.md.
"""

from typing import TYPE_CHECKING

from benchmax._lazy_names import lazy_attribute

if TYPE_CHECKING:
    from benchmax.capture._address import CaptureAddress
    from benchmax.capture._calls import CapturedCall
    from benchmax.capture._endpoint import CaptureEndpoint
    from benchmax.capture._errors import CaptureError
    from benchmax.capture._session import CaptureFailure, CaptureSession, Refusal
    from benchmax.capture._shared import loop_endpoint

__all__ = [
    "CaptureAddress",
    "CaptureEndpoint",
    "CaptureError",
    "CaptureFailure",
    "CaptureSession",
    "CapturedCall",
    "Refusal",
    "loop_endpoint",
]

_LAZY = {
    "CaptureAddress": "benchmax.capture._address",
    "CaptureEndpoint": "benchmax.capture._endpoint",
    "CaptureError": "benchmax.capture._errors",
    "CaptureFailure": "benchmax.capture._session",
    "CaptureSession": "benchmax.capture._session",
    "Refusal": "benchmax.capture._session",
    "CapturedCall": "benchmax.capture._calls",
    "loop_endpoint": "benchmax.capture._shared",
}


def __getattr__(name: str) -> object:
    """The names whose modules import aiohttp, imported on first use."""
    return lazy_attribute(globals(), _LAZY, name)
