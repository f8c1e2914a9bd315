"""Test environments without a GPU or an API key: a real OpenAI-compatible mock model server.

``MockModelServer`` serves ``POST /v1/chat/completions`` (and ``GET /v1/models``) over
real HTTP on 127.0.0.1, answers from a *policy* and records every request. A complete
test of a tool-using environment (runs as is, e.g. under ``asyncio.run(main())``)::

    from benchmax.envs import BaseEnv, Example, RolloutRequest, StaticBearerAuth
    from benchmax.testing import Fault, MockModelServer, scripted

    class Multiply(BaseEnv):
        reward_keys = ("correct",)
        max_turns = 3

        async def create_dataset(self, split, base_dir, *, max_examples=None):
            raise NotImplementedError("not needed to run one rollout")

        async def list_tools(self):
            schema = {
                "type": "object",
                "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                "required": ["a", "b"],
            }
            return [{"type": "function", "function": {"name": "multiply", "parameters": schema}}]

        async def run_tool(self, rollout_id, tool_name, **arguments):
            return arguments["a"] * arguments["b"]

        async def compute_reward(self, rollout):
            return {"correct": float(rollout.messages[-1]["content"] == "<answer>42</answer>")}

    async def main():
        prompt = [{"role": "user", "content": "What is 6 * 7?"}]
        policy = scripted([
            {"tool_calls": [{"name": "multiply", "arguments": {"a": 6, "b": 7}}]},
            "<answer>42</answer>",
        ])
        async with MockModelServer(policy) as server:
            server.inject(Fault.status(503, retry_after=0), session="r1")  # fails once
            request = RolloutRequest(
                rollout_id="r1",
                example=Example(id="ex-1", payload={"prompt_messages": prompt}),
                model="any-model",
                base_url=server.session_url("r1"),
                model_auth=StaticBearerAuth("sk-test"),
            )
            rollout = await Multiply(model_retries=1).run_rollout(request)
        assert rollout.termination_reason == "finished"
        assert rollout.rewards == {"correct": 1.0}
        calls = server.requests_for("r1")
        assert len(calls) == 3  # the 503, the tool call, the answer
        assert calls[2].messages[-1]["role"] == "tool"  # the env sent the tool result back
        assert "sk-test" not in repr(calls[0])  # Authorization is masked: 'Bearer ***'

* **Policies** take the request body (``dict``) — and, if they accept a second
  positional argument, the ``RecordedRequest`` (session, headers, path) — and return
  the assistant's text, a message dict (``content``, ``tool_calls``, ``finish_reason``;
  tool calls in OpenAI shape or as ``{"name", "arguments"}``) or a ``Fault``. Sync or
  async. Ready-made: ``echo`` (repeats the last user message), ``scripted(replies)``
  (in order, per session; HTTP 500 ``script_exhausted`` when the script runs out unless
  ``when_exhausted="repeat_last"`` or ``"cycle"``), ``tool_exerciser`` (calls every
  advertised tool once, in one turn, with arguments valid for its JSON Schema, then
  answers; ``ToolExerciser(one_per_turn=True)`` calls one tool per turn;
  ``example_value(schema)`` gives such a value). A policy that raises another exception
  yields HTTP 500 with code ``mock_policy_error``.
* **Sessions** come from the URL: any path ending in ``/chat/completions`` is served and
  the part before it names the session; ``session_url(name)`` is
  ``http://127.0.0.1:PORT/sessions/<name>/v1`` and its requests are recorded with
  ``.session == name``; ``base_url`` (``.../v1``) is session ``""``. ``{rollout_id}`` in a
  name is kept as written, so ``session_url("{rollout_id}")`` as a ``RunConfig.base_url``
  gives every rollout a session named by its rollout id.
* **Faults**: ``server.inject(Fault.status(400, error_code="context_budget_exceeded"))``,
  ``Fault.status(429, retry_after=1)``, ``Fault.status(500)``, ``Fault.delay(2.0)``,
  ``Fault.malformed()``, ``Fault.drop()``, ``Fault.no_choices()``, and
  ``Fault.raw(body, status=200)`` serving exactly ``body`` (bytes, or any JSON value as
  its JSON text) to test replies real servers send; per session with
  ``session=...``; for several calls with ``times=N`` or every call with ``times=None``.
  Session faults fire before faults for any session; each queue is first in, first out.
* **Recording**: ``server.requests`` / ``server.requests_for(session)`` hold
  ``RecordedRequest`` values (``session``, ``method``, ``path``, ``headers``, ``body``,
  ``time``, ``connection``); their ``repr`` and the server's log records (logger
  ``benchmax.testing``) mask ``Authorization`` and other credential headers.
  ``clear_requests()`` forgets them; ``record=False`` keeps none (long benchmark runs).
* **Token mode**: ``MockModelServer(policy, tokens=True)`` answers as vLLM shapes its
  replies and, when a request asks (``logprobs``, ``return_token_ids``,
  ``return_tokens_as_token_ids``), adds the prompt ids, completion ids and logprobs of a
  toy tokenizer and ChatML template (``ToyChatTemplate``: one token per character, id
  ``100 + ord(c)``; ``chat_template="qwen3"`` drops the reasoning of assistant turns
  before the last user message, as Qwen3's template does). Deterministic: the same
  conversation always gives the same ids and logprobs.
* **Limits**: the server does not stream (``stream: true`` gets HTTP 400); request
  bodies over ``max_body_size`` (64 MiB by default) get HTTP 413, header blocks over
  64 KiB get HTTP 431, and bytes that are not HTTP get HTTP 400; the connection closes.
* **Connections**: HTTP/1.1 keep-alive by default; ``keep_alive=False`` closes after
  every response, and ``await server.close_idle_connections()`` closes pooled idle
  connections on demand. ``RecordedRequest.connection`` numbers the TCP connection.
  ``stop()`` (or leaving the ``async with``) closes every connection, busy or idle.

Standalone: ``python -m benchmax.testing --port 8000 --policy package.module:function``
(or ``path/to/file.py:function``, ``echo``, ``tool_exerciser``); it prints the base URL
and serves until interrupted. The same from Python::

    async with MockModelServer(load_policy("echo"), port=8000) as server:
        print(server.base_url)
        await server.serve_forever()  # until cancelled
"""

from benchmax.testing._errors import MockServerError
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
from benchmax.testing._tokens import CHAT_TEMPLATES, SPECIAL_TOKENS, ToyChatTemplate

__all__ = [
    "CHAT_TEMPLATES",
    "SPECIAL_TOKENS",
    "Fault",
    "FaultKind",
    "MockServerError",
    "MockModelServer",
    "Policy",
    "PolicyResult",
    "RecordedRequest",
    "ScriptedPolicy",
    "ToolExerciser",
    "ToyChatTemplate",
    "echo",
    "example_value",
    "load_policy",
    "mask_header_value",
    "message_text",
    "scripted",
    "session_of_path",
    "tool_exerciser",
]
