"""Model HTTP for BaseEnv and the Judge (private; a layer between ``auth`` and ``envs``).

* ``connections``: one pool of keep-alive connections per event loop, and its lifetime;
* ``chat``: one chat-completions call of a rollout (auth per attempt, deadline,
  retries, failure classification) over aiohttp; the Judge keeps the OpenAI SDK,
  over ``connections.sdk_http_client``;
* ``retries``: the retry policy (what is transient, how long to wait);
* ``deadlines``: one total deadline per HTTP attempt;
* ``headers``: checking auth headers before they go on the wire;
* ``in_process``: endpoints answered inside this process (``benchmax serve``'s policy
  bridge), which ``chat`` calls without a socket;
* ``json_codec``: request and reply bodies (orjson, with ``json`` for what it refuses);
* ``replies``: reading a decoded reply into the transcript message, tool calls, outcome and
  token usage (anything a server sends is data, never a contract violation).

Nothing outside this package touches HTTP for model calls.
"""
