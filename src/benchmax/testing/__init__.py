"""Test environments without a GPU or an API key: a real OpenAI-compatible mock model server.

``MockModelServer`` serves ``POST /v1/chat/completions`` (and ``GET /v1/models``) over
real HTTP on 127.0.0.1, answering from a *policy*, and records every request::

    from benchmax.testing import Fault, MockModelServer, scripted

    async def test_my_env_finishes():
        policy = scripted([
            {"tool_calls": [{"name": "multiply", "arguments": {"left": 6, "right": 7}}]},
            "<answer>42</answer>",
        ])
        async with MockModelServer(policy) as server:
            request = RolloutRequest(..., base_url=server.session_url("r1"), model="m")
            rollout = await MyEnv().run_rollout(request)
            assert rollout.termination_reason == "finished"
            assert len(server.requests_for("r1")) == 2

* **Policies** take the request body (``dict``) — and, if they accept a second
  positional argument, the ``RecordedRequest`` (session, headers, path) — and return
  the assistant's text, a message dict (``content``, ``tool_calls``, ``finish_reason``;
  tool calls in OpenAI shape or as ``{"name", "arguments"}``) or a ``Fault``. Sync or
  async. Ready-made: ``echo`` (repeats the last user message), ``scripted(replies)``
  (in order, per session; HTTP 500 ``script_exhausted`` when the script runs out unless
  ``when_exhausted="repeat_last"`` or ``"cycle"``), ``tool_exerciser`` (calls every
  advertised tool once, in one turn, with arguments valid for its JSON Schema, then
  answers; ``ToolExerciser(one_per_turn=True)`` calls one tool per turn). A policy
  that raises another exception yields HTTP 500 with code ``mock_policy_error``.
* **Sessions** come from the URL: ``session_url(name)`` is
  ``http://127.0.0.1:PORT/sessions/<name>/v1`` and its requests are recorded with
  ``.session == name``; ``base_url`` (``.../v1``) is session ``""``.
* **Faults**: ``server.inject(Fault.status(400, error_code="context_budget_exceeded"))``,
  ``Fault.status(429, retry_after=1)``, ``Fault.status(500)``, ``Fault.delay(2.0)``,
  ``Fault.malformed()``, ``Fault.drop()``, ``Fault.no_choices()``; per session with
  ``session=...``; for several calls with ``times=N`` or every call with ``times=None``.
* **Recording**: ``server.requests`` / ``server.requests_for(session)`` hold
  ``RecordedRequest`` values (``session``, ``method``, ``path``, ``headers``, ``body``,
  ``time``, ``connection``); their ``repr`` and the server's log records (logger
  ``benchmax.testing``) mask ``Authorization``. ``clear_requests()`` forgets them;
  ``record=False`` keeps none (long benchmark runs).
* **Connections**: HTTP/1.1 keep-alive by default; ``keep_alive=False`` closes after
  every response, and ``await server.close_idle_connections()`` closes pooled idle
  connections on demand. ``RecordedRequest.connection`` numbers the TCP connection.

Standalone: ``python -m benchmax.testing --port 8000 --policy package.module:function``
(or ``path/to/file.py:function``, ``echo``, ``tool_exerciser``); from Python::

    async with MockModelServer(load_policy(spec), port=8000) as server:
        print(server.base_url)
        await server.serve_forever()  # until cancelled
"""

from benchmax.testing._faults import Fault, FaultKind
from benchmax.testing._policies import (
    Policy,
    PolicyResult,
    ScriptedPolicy,
    ToolExerciser,
    echo,
    load_policy,
    message_text,
    scripted,
    tool_exerciser,
)
from benchmax.testing._recording import RecordedRequest, mask_header_value
from benchmax.testing._schema_values import example_value
from benchmax.testing._server import MockModelServer, session_of_path

__all__ = [
    "Fault",
    "FaultKind",
    "MockModelServer",
    "Policy",
    "PolicyResult",
    "RecordedRequest",
    "ScriptedPolicy",
    "ToolExerciser",
    "echo",
    "example_value",
    "load_policy",
    "mask_header_value",
    "message_text",
    "scripted",
    "session_of_path",
    "tool_exerciser",
]
