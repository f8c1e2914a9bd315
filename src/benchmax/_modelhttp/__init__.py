"""Model HTTP: every request benchmax sends to a model or a judge (private; a layer between
``auth`` and ``envs``). Import from here only: the names below are the interface, the
submodules are this package's own.

Kinds of call, each with one retry policy:

==========================  ==================================  ===============================
call                        entry point                         retries
==========================  ==================================  ===============================
a rollout's chat call       ``ChatSession.complete`` (BaseEnv)  ``model_retries`` transient
                                                                failures (``retries``: 408,
                                                                409, 429, 5xx, connection
                                                                errors, timeouts; backoff with
                                                                jitter, ``Retry-After``)
a chat call outside a       ``complete_once`` (the simulated    the same policy, with the
rollout                     user's turn, ``token_preflight``)   caller's retry count
a judge (or teacher) call   ``sdk_http_client`` under the       the OpenAI SDK's
                            OpenAI SDK (``Judge``, datagen)     ``max_retries``; 401/403 by
                                                                ``Judge.auth_attempts``
an endpoint check           ``get_models`` (``run``'s endpoint  none: one attempt
                            check, the judge check)
==========================  ==================================  ===============================

Every one resolves auth headers per attempt and checks them (``sendable_auth_headers``,
also used for MCP's HTTP transport) before they go on the wire, and bounds an attempt
with one total deadline (``within_deadline``). ``read_reply`` and ``read_call_tokens`` turn
a decoded reply into the transcript message, tool calls, outcome, usage and exact tokens
(anything a server sends is data, never a contract violation).

The chat client and the connection pool (aiohttp) are imported on first use of
``ChatSession``, ``CallFailure``, ``complete_once``, ``token_preflight``, ``PoolLease``,
``loop_pool``, ``sdk_http_client`` or ``sdk_http_module``: ``import benchmax.envs``
stays cheap.

``ChatSession(..., plain_http=True)`` (the capture endpoint's upstream calls) sends
``http://`` calls without a proxy over a small keep-alive HTTP/1.1 client on asyncio
protocols (``keepalive.py``, one set of connections per loop in the loop's pool), and
everything else (``https://``, proxies, redirects) over aiohttp.

``register_in_process``/``unregister_in_process`` answer a base URL inside this process
(``benchmax serve``'s policy bridge): ``ChatSession`` then calls the handler without a socket.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from benchmax._lazy_names import lazy_attribute
from benchmax._modelhttp.deadlines import AttemptTimedOut, within_deadline
from benchmax._modelhttp.errors import ModelHTTPError
from benchmax._modelhttp.headers import sendable_auth_headers, wire_headers
from benchmax._modelhttp.in_process import Handler as InProcessHandler
from benchmax._modelhttp.in_process import register as register_in_process
from benchmax._modelhttp.in_process import unregister as unregister_in_process
from benchmax._modelhttp.json_codec import encode as encode_json
from benchmax._modelhttp.models_probe import ModelsAnswer, ModelsUnreachable, get_models
from benchmax._modelhttp.replies import (
    Reply,
    ReplyFailure,
    ToolCall,
    add_usage,
    finish_reason_table,
    read_reply,
    reply_usage,
    reply_weights_version,
)
from benchmax._modelhttp.tokens import (
    TOKEN_REQUEST_FIELDS,
    CallTokens,
    TokenDeficiency,
    read_call_tokens,
)

if TYPE_CHECKING:
    from benchmax._modelhttp.chat import (
        CallFailure,
        ChatSession,
        ModelReplyError,
        ModelStatusError,
        complete_once,
    )
    from benchmax._modelhttp.connections import (
        PoolLease,
        loop_pool,
        sdk_http_client,
        sdk_http_module,
    )
    from benchmax._modelhttp.keepalive import (
        ChunkedBody,
        ChunkedBodyError,
        ChunkedBodyTooLarge,
    )
    from benchmax._modelhttp.preflight import PreflightProblem, token_preflight

__all__ = [
    "TOKEN_REQUEST_FIELDS",
    "AttemptTimedOut",
    "CallFailure",
    "CallTokens",
    "ChatSession",
    "ChunkedBody",
    "ChunkedBodyError",
    "ChunkedBodyTooLarge",
    "InProcessHandler",
    "ModelHTTPError",
    "ModelReplyError",
    "ModelStatusError",
    "ModelsAnswer",
    "ModelsUnreachable",
    "PoolLease",
    "PreflightProblem",
    "Reply",
    "ReplyFailure",
    "TokenDeficiency",
    "ToolCall",
    "add_usage",
    "complete_once",
    "encode_json",
    "finish_reason_table",
    "get_models",
    "loop_pool",
    "read_call_tokens",
    "read_reply",
    "reply_usage",
    "reply_weights_version",
    "register_in_process",
    "sdk_http_client",
    "sdk_http_module",
    "sendable_auth_headers",
    "token_preflight",
    "unregister_in_process",
    "within_deadline",
    "wire_headers",
]

_LAZY = {
    "ChunkedBody": "benchmax._modelhttp.keepalive",
    "ChunkedBodyError": "benchmax._modelhttp.keepalive",
    "ChunkedBodyTooLarge": "benchmax._modelhttp.keepalive",
    "CallFailure": "benchmax._modelhttp.chat",
    "ChatSession": "benchmax._modelhttp.chat",
    "ModelReplyError": "benchmax._modelhttp.chat",
    "ModelStatusError": "benchmax._modelhttp.chat",
    "complete_once": "benchmax._modelhttp.chat",
    "PoolLease": "benchmax._modelhttp.connections",
    "loop_pool": "benchmax._modelhttp.connections",
    "sdk_http_client": "benchmax._modelhttp.connections",
    "sdk_http_module": "benchmax._modelhttp.connections",
    "PreflightProblem": "benchmax._modelhttp.preflight",
    "token_preflight": "benchmax._modelhttp.preflight",
}


def __getattr__(name: str) -> Any:
    """The names whose modules import aiohttp, imported on first use."""
    return lazy_attribute(globals(), _LAZY, name)
