"""beyond.md §9 "Context overflow": every common server form of "the prompt does not fit"
ends the rollout as ``context_exceeded`` (zero rewards, no reward hooks, tools already run
stay run, the server's message logged); an unrelated 400 stays ``model_error``.

The bodies below are the shapes the servers send (read in their source and issue threads).
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
from tests.envs.base.support import AnswerEnv, ToolEnv, make_request, tool_reply

from benchmax.testing import Fault, MockModelServer

MODEL_FAILED = "base.rollout.model_failed rollout_id=rollout-0 termination_reason="

VLLM_OLD = (
    "This model's maximum context length is 4096 tokens. However, you requested 4300 tokens "
    "(4200 in the messages, 100 in the completion). Please reduce the length of the messages "
    "or completion."
)
VLLM_NEW_INPUT = (
    "This model's maximum context length is 4096 tokens. However, your request has 5000 input "
    "tokens. Please reduce the length of the input messages. (parameter=input_tokens, "
    "value=5000)"
)
VLLM_MAX_TOKENS = (
    "'max_tokens' or 'max_completion_tokens' is too large: 8000. This model's maximum context "
    "length is 4096 tokens and your request has 2778 input tokens (8000 > 4096 - 2778)."
)
VLLM_ENGINE = (
    "The decoder prompt (length 9254) is longer than the maximum model length of 4096. Make "
    "sure that `max_model_len` is no smaller than the number of text tokens."
)
VLLM_PROMPT_LENGTH = "Prompt length of 5000 is longer than the maximum model length of 4096."
SGLANG_INPUT = "The input (5000 tokens) is longer than the model's context length (4096 tokens)."
SGLANG_REQUESTED = (
    "Requested token count exceeds the model's maximum context length of 4096 tokens. You "
    "requested a total of 4200 tokens: 4100 tokens from the input messages and 100 tokens for "
    "the completion. Please reduce the number of tokens in the input messages or the "
    "completion to fit within the limit."
)
TGI_TOTAL = (
    "Input validation error: `inputs` tokens + `max_new_tokens` must be <= 4096. Given: 4000 "
    "`inputs` tokens and 200 `max_new_tokens`"
)
TGI_INPUTS = "Input validation error: `inputs` must have less than 4096 tokens. Given: 4545"
LITELLM = (
    "litellm.ContextWindowExceededError: litellm.BadRequestError: ContextWindowExceededError: "
    "OpenAIException - prompt does not fit"
)


def _vllm_old(message: str) -> dict[str, Any]:
    return {
        "object": "error",
        "message": message,
        "type": "BadRequestError",
        "param": None,
        "code": 400,
    }


def _error(message: str, **fields: Any) -> dict[str, Any]:
    return {"error": {"message": message, **fields}}


OVERFLOWS = {
    "vllm-old": (400, _vllm_old(VLLM_OLD)),
    "vllm-new-input": (
        400,
        _error(VLLM_NEW_INPUT, type="BadRequestError", param="input_tokens", code=400),
    ),
    "vllm-prompt-plus-max-tokens": (
        400,
        _error(VLLM_MAX_TOKENS, type="BadRequestError", param=None, code=400),
    ),
    "vllm-engine-decoder-prompt": (400, _error(VLLM_ENGINE, type="BadRequestError", code=400)),
    "vllm-engine-prompt-length": (400, _vllm_old(VLLM_PROMPT_LENGTH)),
    "vllm-negative-budget": (400, _vllm_old("max_tokens must be at least 1, got -204.")),
    "openai": (
        400,
        _error(
            "This model's maximum context length is 8192 tokens. However, your messages "
            "resulted in 9000 tokens. Please reduce the length of the messages.",
            type="invalid_request_error",
            param="messages",
            code="context_length_exceeded",
        ),
    ),
    "openai-code-only": (400, _error("too long", code="context_length_exceeded")),
    "llama.cpp": (
        400,
        _error(
            "the request exceeds the available context size, try increasing it",
            code=400,
            type="exceed_context_size_error",
            n_prompt_tokens=4476,
            n_ctx=4096,
        ),
    ),
    "llama.cpp-older": (
        400,
        _error(
            "request (4476 tokens) exceeds the available context size (4096 tokens)",
            code=400,
            type="exceed_context_size_error",
        ),
    ),
    "sglang-input": (400, _error(SGLANG_INPUT, type="BadRequestError", code=400)),
    "sglang-requested": (400, _vllm_old(SGLANG_REQUESTED)),
    "tgi-total": (422, {"error": TGI_TOTAL, "error_type": "validation"}),
    "tgi-inputs": (422, {"error": TGI_INPUTS, "error_type": "validation"}),
    "litellm-proxy": (400, _error(LITELLM, type=None, param=None, code="400")),
    "0.2-code-in-200": (200, _error("too long", code="context_budget_exceeded")),
    "openai-code-in-200": (200, _error("too long", code="context_length_exceeded")),
    "payload-too-large": (413, _error("the request exceeds the available context size")),
    # Issue 28 kind 8: the wording of current releases, read in their sources.
    "vllm-0.3x-no-room-at-all": (
        400,
        _error(
            "This model's maximum context length is 4096 tokens. However, your prompt "
            "contains at least 4097 input tokens, which exceeds this limit even without any "
            "output tokens. Please reduce the length of the input prompt. "
            "(parameter=input_tokens, value=4097)",
            type="BadRequestError",
            param="input_tokens",
            code=400,
        ),
    ),
    "vllm-0.3x-text-only": (  # a gateway that keeps the text, not the param
        400,
        _error(
            "Your prompt contains at least 4097 input tokens, which exceeds this limit even "
            "without any output tokens. (parameter=input_tokens, value=4097)"
        ),
    ),
    "vllm-0.2x-at-least-total": (
        400,
        _vllm_old(
            "This model's maximum context length is 8192 tokens. However, you requested 64 "
            "output tokens and your prompt contains at least 8129 input tokens, for a total "
            "of at least 8193 tokens. Please reduce the length of the input prompt or the "
            "number of requested output tokens."
        ),
    ),
    "vllm-renderer-you-passed": (
        400,
        _error(
            "You passed 5000 input tokens and requested 16 output tokens. However, the "
            "model's context length is only 4096 tokens, resulting in a maximum input length "
            "of 4080 tokens. Please reduce the length of the input prompt.",
            type="BadRequestError",
            param="input_tokens",
            code=400,
        ),
    ),
    "vllm-param-only": (400, _error("prompt rejected", param="input_tokens", code=400)),
    "vllm-characters": (400, _error("too many characters", param="input_text", code=400)),
    "sglang-scheduler": (
        400,
        _error(
            "Input length (5000 tokens) exceeds the maximum allowed length (4096 tokens). "
            "Use a shorter input or enable --allow-auto-truncate.",
            type="BadRequestError",
            code=400,
        ),
    ),
    "sglang-disaggregated": (
        400,
        _error("Request 9f2c exceeds the maximum number of tokens: 5000 > 4096", code=400),
    ),
    "ollama-prompt": (
        400,
        _error(
            "the prompt is longer than the context length currently available to the model; "
            "shorten the prompt, adjust the context length in settings, or use a model with a "
            "longer context length",
            type="invalid_request_error",
        ),
    ),
    "ollama-input": (400, _error("the input length exceeds the context length")),
    "ollama-mlx": (
        400,
        _error(
            "input length (5000 tokens) exceeds the model's maximum context length (4096 tokens)"
        ),
    ),
    "openai-window": (
        400,
        _error(
            "Your input exceeds the context window of this model. Please adjust your input "
            "and try again.",
            type="invalid_request_error",
            code="context_length_exceeded",
        ),
    ),
    "openai-window-text-only": (
        400,
        _error("Your input exceeds the context window of this model. Please adjust it."),
    ),
    "llama.cpp-current": (
        400,
        _error(
            "request (4476 tokens) exceeds the available context size (4096 tokens), try "
            "increasing it",
            code=400,
            type="exceed_context_size_error",
            n_prompt_tokens=4476,
            n_ctx=4096,
        ),
    ),
}


@pytest.mark.parametrize(("status", "body"), OVERFLOWS.values(), ids=OVERFLOWS.keys())
async def test_every_server_form_of_context_overflow_is_context_exceeded(
    mock_server: MockModelServer,
    caplog: pytest.LogCaptureFixture,
    status: int,
    body: dict[str, Any],
) -> None:
    mock_server.inject(Fault.raw(body, status=status))
    env = AnswerEnv(model_retries=2)
    outcomes = await env.run_group([make_request(mock_server)])
    assert outcomes["rollout-0"].termination_reason == "context_exceeded"
    assert outcomes["rollout-0"].rewards == {"correct": 0.0}
    assert env.reward_calls == []
    assert len(mock_server.requests) == 1  # never retried
    (record,) = [r for r in caplog.records if r.getMessage().startswith(MODEL_FAILED)]
    assert record.getMessage() == f"{MODEL_FAILED}context_exceeded"
    assert record.levelno == logging.WARNING
    error = body["error"] if "error" in body else body
    said = error["message"] if isinstance(error, dict) else error
    assert said[:40] in caplog.text  # the server's message is logged
    await env.aclose()


async def test_overflow_after_a_tool_turn_keeps_the_tool_run(
    mock_server: MockModelServer,
) -> None:
    env = ToolEnv()

    async def then_overflow(body: dict[str, Any]) -> object:
        if len(body["messages"]) > 1:
            return Fault.raw(_vllm_old(VLLM_OLD), status=400)
        return tool_reply(("multiply", '{"left": 6, "right": 7}'))

    mock_server.policy = then_overflow
    rollout = await env.run_rollout(make_request(mock_server))
    assert rollout.termination_reason == "context_exceeded"
    assert rollout.rewards == {"correct": 0.0}
    assert env.tool_calls == [("rollout-0", "multiply", {"left": 6, "right": 7})]
    assert [m["role"] for m in rollout.messages] == ["user", "assistant", "tool"]
    assert env.reward_calls == []
    await env.aclose()


UNRELATED = {
    "bad-messages": (400, _error("malformed messages", code="bad_messages")),
    "vllm-unknown-model": (
        400,
        _vllm_old("The model `gpt-5` does not exist."),
    ),
    "vllm-bad-temperature": (400, _vllm_old("temperature must be non-negative, got -1.0.")),
    "tgi-other-validation": (
        422,
        {
            "error": "Input validation error: `temperature` must be strictly positive",
            "error_type": "validation",
        },
    ),
    "401-with-overflow-code": (401, _error("denied", code="context_length_exceeded")),
    "500-with-overflow-text": (500, _vllm_old(VLLM_OLD)),
    "500-with-overflow-param": (500, _error("engine died", param="input_tokens")),
    "vllm-max-tokens-param": (
        400,
        _error("max_tokens must be at most 4096", param="max_tokens", code=400),
    ),
    "a-name-over-its-length": (
        400,
        _error("tools[0].function.name exceeds the maximum allowed length of 64 characters"),
    ),
    "an-image-over-its-size": (
        400,
        _error("Image size 9000000 bytes exceeds maximum allowed size of 5000000 bytes"),
    ),
    "llama.cpp-kv-cache-full": (  # a busy server's transient 500, not the prompt's length
        500,
        _error(
            "Input prompt is too big compared to KV size. Please try increasing KV size.",
            type="server_error",
        ),
    ),
}


@pytest.mark.parametrize(("status", "body"), UNRELATED.values(), ids=UNRELATED.keys())
async def test_an_unrelated_refusal_stays_model_error(
    mock_server: MockModelServer, status: int, body: dict[str, Any]
) -> None:
    mock_server.inject(Fault.raw(body, status=status))
    env = AnswerEnv()
    rollout = await env.run_rollout(make_request(mock_server))
    assert rollout.termination_reason == "model_error"
    await env.aclose()
