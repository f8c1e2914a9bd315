"""Customer support with a simulated customer and a judge that reads the whole conversation.

Rows look like ``{"order_id": "A17", "opening": ..., "persona": ..., "goal": ...,
"resolution": ...}``. The customer's opening message starts the chat; after every reply of
the agent that calls no tool, a ``SimulatedUser`` (a model playing the customer with the
row's persona and goal) answers or ends the chat with its stop marker. The agent has two
typed tools over ``orders.json``: ``lookup_order`` and ``issue_refund`` (only lost parcels
are refunded; anything else is a ``ToolError`` the agent reads).

Rewards: ``resolved`` (deterministic: the order was looked up, and a refund was issued
exactly when the parcel was lost) and two judge rubrics over the whole transcript, tool
calls and results included (``score_rubrics(..., read_trajectory=True)``):
``rubric_grounded`` (what the agent says about the order comes from a tool result) and
``rubric_unsupported_promise`` (a negative rubric: 1.0 means the agent promised nothing
the tools do not back). The judge's explanations are stored with each rollout
(``explain=True``) and shown by ``benchmax show`` and ``benchmax view``.

The judge and the customer authenticate with ``InjectedAuth("judge")`` and
``InjectedAuth("user")`` (``--auth judge=VAR --auth user=VAR``); offline, ``@mock`` and one
mock policy play the agent, the customer and the judge::

    uv run benchmax run examples/support_chat/env.py:SupportChatEnv \
        --data examples/support_chat --mock-policy examples/support_chat/policy.py:respond \
        --env-arg judge_base_url=@mock
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any

from benchmax.auth import InjectedAuth
from benchmax.envs import (
    BaseEnv,
    BaseRollout,
    DatasetSplit,
    Example,
    JsonlDataset,
    JsonRow,
    canonical_example_id,
)
from benchmax.rewards import Judge, Rubric, rubric_reward_key, score_rubrics
from benchmax.tools import SimulatedUser, ToolError, tool

ORDERS: dict[str, dict[str, str]] = json.loads(
    Path(__file__).with_name("orders.json").read_text(encoding="utf-8")
)

SYSTEM_PROMPT = (
    "You are the support agent of an online shop. Help the customer with their order. "
    "Use the tools to look orders up and to issue refunds; only tell the customer what the "
    "tools confirm. Refunds are only for parcels the carrier lost."
)

RUBRICS = (
    Rubric(
        "Grounded",
        "Everything the assistant tells the customer about the order (its status, dates, "
        "refunds) is backed by a tool result earlier in the conversation.",
    ),
    Rubric(
        "Unsupported promise",
        "The assistant promises or claims an action (a refund, a delivery date) that no tool "
        "result in the conversation supports.",
        polarity="negative",
    ),
)


def _order(order_id: str) -> dict[str, str]:
    order = ORDERS.get(order_id.strip().upper())
    if order is None:
        raise ToolError(f"no order with id {order_id!r}")
    return order


@tool
def lookup_order(order_id: Annotated[str, "the order id, e.g. A17"]) -> dict[str, str]:
    """Look an order up: the item, its delivery status and a note from the carrier."""
    return {"order_id": order_id.strip().upper(), **_order(order_id)}


@tool
def issue_refund(
    order_id: Annotated[str, "the order id, e.g. A17"],
    reason: Annotated[str, "why the order is refunded"],
) -> str:
    """Refund an order in full. Only parcels the carrier lost can be refunded."""
    order = _order(order_id)
    if order["status"] != "lost":
        raise ToolError(
            f"order {order_id} cannot be refunded: it is {order['status']} ({order['note']})"
        )
    return f"refund issued for order {order_id.strip().upper()} ({order['item']}): {reason}"


class SupportChatEnv(BaseEnv):
    """A support chat: tools, a simulated customer, a judge over the whole transcript."""

    reward_keys = ("resolved", *(rubric_reward_key(rubric) for rubric in RUBRICS))
    max_turns = 8
    max_tool_calls = 6
    tools = (lookup_order, issue_refund)

    def __init__(
        self,
        *,
        judge_base_url: str,
        user_base_url: str | None = None,
        judge_model: str = "mock-judge",
        user_model: str = "mock-user",
    ) -> None:
        super().__init__()
        self.judge = Judge(model=judge_model, base_url=judge_base_url, auth=InjectedAuth("judge"))
        self.user = SimulatedUser(
            model=user_model,
            base_url=user_base_url or judge_base_url,
            auth=InjectedAuth("user"),
        )

    async def create_dataset(
        self, split: DatasetSplit, base_dir: Path, *, max_examples: int | None = None
    ) -> JsonlDataset[JsonRow]:
        return JsonlDataset(
            base_dir / f"{split}.jsonl", row_to_example=self._example, max_examples=max_examples
        )

    def _example(self, row: JsonRow) -> Example[JsonRow]:
        payload = {
            "prompt_messages": [
                {"role": "system", "content": SYSTEM_PROMPT},
                {"role": "user", "content": row["opening"]},
            ],
            "order_id": row["order_id"],
            "persona": row["persona"],
            "goal": row["goal"],
            "resolution": row["resolution"],
        }
        return Example(id=canonical_example_id(payload), payload=payload)

    async def user_turn(
        self, rollout_id: str, messages: Sequence[Mapping[str, Any]], example: Example[JsonRow]
    ) -> str | None:
        return await self.user.reply(rollout_id, messages, example)

    async def compute_reward(self, rollout: BaseRollout) -> dict[str, float]:
        args = rollout.example_args
        judged = await score_rubrics(
            rollout.rollout_id,
            rollout.messages,
            ground_truth=args["resolution"],
            rubrics=RUBRICS,
            question=f"A customer writes about order {args['order_id']}. {args['goal']}",
            judge=self.judge,
            read_trajectory=True,
            explain=True,
        )
        return {"resolved": _resolved(rollout.messages, args["order_id"]), **judged}


def _resolved(messages: Sequence[Mapping[str, Any]], order_id: str) -> float:
    """1.0 when the order was looked up and a refund was issued exactly when it was lost."""
    names = {
        call["id"]: call["function"]["name"]
        for message in messages
        for call in message.get("tool_calls") or ()
    }
    results = [
        (names.get(message.get("tool_call_id")), str(message.get("content")))
        for message in messages
        if message.get("role") == "tool"
    ]
    looked_up = any(name == "lookup_order" and order_id in text for name, text in results)
    refunded = any(name == "issue_refund" and "refund issued" in text for name, text in results)
    lost = ORDERS[order_id]["status"] == "lost"
    return float(looked_up and refunded == lost)
