"""A deterministic mock policy that takes a little time per call (for interruption tests)."""

from __future__ import annotations

import asyncio
import hashlib
from typing import Any

from benchmax.testing import RecordedRequest


async def paced(body: dict[str, Any], request: RecordedRequest) -> str:
    await asyncio.sleep(0.1)
    question = body["messages"][-1]["content"]
    k = int(request.session.rpartition(".r")[2] or 0)
    seed = hashlib.sha256(question.encode()).digest()[0]
    return question if (seed + k) % 3 else "wrong"
