"""Property: no server reply can raise out of ``run_group`` (issue 9 §1, beyond.md §7).

Arbitrary JSON values shaped around the chat-completion schema (and some not shaped at
all) are served raw by ``MockModelServer`` to a real ``run_group``; every outcome must
settle with exactly the declared reward keys, and every transcript stays consistent.
"""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.envs.base.support import MULTIPLY_TOOL

from benchmax._observer import RolloutReport, observe_rollouts
from benchmax.auth import StaticBearerAuth
from benchmax.envs.base.env import BaseEnv, BaseRollout
from benchmax.envs.dataset import Dataset
from benchmax.envs.shared_types import Example, RewardMap, RolloutRequest
from benchmax.testing import Fault, MockModelServer

REASONS = {
    "finished",
    "model_error",
    "tool_error",
    "max_turns_exceeded",
    "tool_budget_exceeded",
    "output_exceeded",
    "content_filter",
}
_sessions = itertools.count()


class AnyReplyEnv(BaseEnv):
    reward_keys = ("correct", "length")
    max_turns = 3
    max_tool_calls = 4

    async def create_dataset(self, split: Any, base_dir: Path, *, max_examples: Any = None) -> Any:
        return Dataset([])

    async def list_tools(self) -> list[Any]:
        return [MULTIPLY_TOOL]

    async def run_tool(self, rollout_id: str, tool_name: str, **tool_args: Any) -> Any:
        return {"echo": sorted(tool_args)}

    async def compute_reward(self, rollout: BaseRollout) -> RewardMap | None:
        content = rollout.messages[-1].get("content")
        text = content if isinstance(content, str) else ""
        return {"correct": float("42" in text), "length": float(len(text))}


class PerSession:
    """A mock policy replaying each session's own script (the last reply repeats)."""

    def __init__(self) -> None:
        self.scripts: dict[str, list[Fault]] = {}
        self.turns: dict[str, int] = {}

    def __call__(self, body: dict[str, Any], recorded: Any) -> Fault:
        script = self.scripts[recorded.session]
        turn = self.turns.get(recorded.session, 0)
        self.turns[recorded.session] = turn + 1
        return script[min(turn, len(script) - 1)]


class Recorder:
    def __init__(self) -> None:
        self.reports: list[RolloutReport] = []

    def rollout_finished(self, report: RolloutReport) -> None:
        self.reports.append(report)


# -- strategies ----------------------------------------------------------------------------------

leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.sampled_from(["\ud800", "\x1b[2J", "stop", "function", "multiply", ""]),
)
anything = st.recursive(
    leaves,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=10,
)


def odd(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Mostly ``strategy``; one time in eight any JSON value in its place."""
    return st.integers(0, 7).flatmap(lambda n: anything if n == 7 else strategy)


def some_keys(**fields: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    """Objects holding any subset of ``fields``."""
    return st.fixed_dictionaries({}, optional=fields)


arguments = st.one_of(
    st.just('{"left": 6, "right": 7}'),
    st.sampled_from(["", "{", "[6, 7]", "null", '{"rollout_id": "x"}', '{"tool_name": 1}']),
    st.text(max_size=16),
    st.dictionaries(st.sampled_from(["left", "right", "rollout_id", "tool_name"]), anything),
    anything,
)
tool_call = st.fixed_dictionaries(
    {
        "function": odd(
            st.fixed_dictionaries(
                {"name": odd(st.sampled_from(["multiply", "multiply", "divide", ""]))},
                optional={"arguments": arguments},
            )
        )
    },
    optional={
        "id": odd(st.sampled_from(["c1", "c2", "", "call_1", "call_2"])),
        "type": odd(st.sampled_from(["function", "function", "custom"])),
    },
)
text_part = some_keys(
    type=st.sampled_from(["text", "image_url", "thinking"]), text=odd(st.text(max_size=12))
)
content = odd(
    st.one_of(
        st.sampled_from(["It is 42.", "no idea", ""]),
        st.none(),
        st.text(max_size=16),
        st.lists(text_part, max_size=3),
    )
)
finish_reason = odd(
    st.sampled_from(
        ["stop", "stop", "STOP", "eos", "length", "content_filter", "tool_calls", "error", "", "x"]
    )
    | st.none()
)
message = odd(
    st.fixed_dictionaries(
        {"content": content},
        optional={
            "role": odd(st.just("assistant")),
            "tool_calls": odd(st.lists(odd(tool_call), max_size=3)),
            "reasoning_content": odd(st.text(max_size=12)),
            "reasoning": anything,
        },
    )
)
choice = odd(
    st.fixed_dictionaries(
        {"message": message}, optional={"finish_reason": finish_reason, "index": st.integers(0, 3)}
    )
)
count = odd(st.integers(min_value=0, max_value=1000))
usage = odd(
    some_keys(
        prompt_tokens=count,
        completion_tokens=count,
        total_tokens=count,
        completion_tokens_details=odd(some_keys(reasoning_tokens=count)),
        prompt_tokens_details=odd(some_keys(cached_tokens=count)),
    )
)
completion = st.fixed_dictionaries(
    {"choices": odd(st.lists(choice, min_size=1, max_size=3))},
    optional={"id": st.just("chatcmpl-x"), "usage": usage, "error": anything},
)
reply_body = st.integers(0, 9).flatmap(
    lambda n: (
        completion.map(Fault.raw)
        if n < 7
        else anything.map(Fault.raw)
        if n < 9
        else st.sampled_from(
            [b"", b"{", b"not json", b'{"choices": [{"message": {"content": "\\ud800"}}]}']
        ).map(Fault.raw)
    )
)


def check_transcript(messages: Any) -> None:
    """Roles are known, tool messages answer the calls just made, ids are unique."""
    json.dumps(messages)  # the runner can write it (NaN and surrogates included)
    seen_ids: set[str] = set()
    pending: list[str] = []
    for entry in messages[1:]:
        assert isinstance(entry, dict)
        if entry["role"] == "assistant":
            assert not pending
            assert list(entry)[:2] == ["role", "content"]
            ids = [call["id"] for call in entry.get("tool_calls", [])]
            assert all(isinstance(i, str) and i for i in ids)
            assert not seen_ids & set(ids) and len(set(ids)) == len(ids)
            seen_ids.update(ids)
            pending = ids
        else:
            assert entry["role"] == "tool"
            assert entry["tool_call_id"] == pending.pop(0)


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(scripts=st.lists(st.lists(reply_body, min_size=1, max_size=3), min_size=1, max_size=2))
async def test_no_server_reply_raises_out_of_run_group(
    mock_server: MockModelServer, scripts: list[list[Fault]]
) -> None:
    env = AnyReplyEnv()
    policy = PerSession()
    requests = []
    for index, script in enumerate(scripts):
        session = f"p{next(_sessions)}"
        policy.scripts[session] = script
        requests.append(
            RolloutRequest(
                rollout_id=f"rollout-{index}",
                example=Example(
                    id="e", payload={"prompt_messages": [{"role": "user", "content": "6*7?"}]}
                ),
                model="m",
                base_url=mock_server.session_url(session),
                model_auth=StaticBearerAuth("k"),
            )
        )
    mock_server.policy = policy
    recorder = Recorder()
    try:
        with observe_rollouts(recorder):
            outcomes = await env.run_group(requests)
    finally:
        mock_server.clear_requests()
        await env.aclose()

    assert list(outcomes) == [r.rollout_id for r in requests]
    for outcome in outcomes.values():
        assert list(outcome.rewards) == ["correct", "length"]
        assert outcome.termination_reason in REASONS
        assert all(math.isfinite(v) for v in outcome.rewards.values())
        if outcome.termination_reason != "finished":
            assert set(outcome.rewards.values()) == {0.0}
    assert len(recorder.reports) == len(requests)
    for report in recorder.reports:
        check_transcript(list(report.messages or ()))
        if report.usage is not None:
            assert report.usage and all(
                isinstance(v, int) and v >= 0 for v in report.usage.values()
            )
