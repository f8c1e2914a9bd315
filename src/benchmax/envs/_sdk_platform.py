"""One platform probe per process for the OpenAI SDK clients the library builds.

Every new ``AsyncOpenAI`` client probes the operating system on its first request
(``get_platform``, run in a worker thread because it may read files). The library
builds a client per rollout and per judge request, so at a thousand concurrent
rollouts that is a thousand thread hops for the same answer. ``share_platform_probe``
gives each new client the answer of the first probe instead; the headers sent are
unchanged.
"""

from __future__ import annotations

import functools
from typing import Any

__all__ = ["share_platform_probe"]


@functools.cache
def _process_platform() -> Any:
    from openai import _base_client

    return _base_client.get_platform()


def share_platform_probe(client: object) -> None:
    """Preset ``client``'s platform probe result when it is an SDK client that has none."""
    if getattr(client, "_platform", ...) is None:
        client._platform = _process_platform()  # type: ignore[attr-defined]
