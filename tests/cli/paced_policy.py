"""A deterministic mock policy that takes a little time per call (for interruption tests).

With ``BENCHMAX_TEST_PAUSE_AFTER=N`` in the environment of the process serving it, every
call after the first ``N`` is held until the run is interrupted: a test then knows the run
is mid-way when it sends its signal, however fast or slow the machine is.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
from typing import Any

from benchmax.testing import RecordedRequest

_PAUSE_AFTER = int(os.environ.get("BENCHMAX_TEST_PAUSE_AFTER", "0")) or None
_calls = 0


async def paced(body: dict[str, Any], request: RecordedRequest) -> str:
    global _calls
    _calls += 1
    if _PAUSE_AFTER is not None and _calls > _PAUSE_AFTER:
        await asyncio.Event().wait()  # never set: held until the run is interrupted
    await asyncio.sleep(0.1)
    question = body["messages"][-1]["content"]
    k = int(request.session.rpartition(".r")[2] or 0)
    seed = hashlib.sha256(question.encode()).digest()[0]
    return question if (seed + k) % 3 else "wrong"
