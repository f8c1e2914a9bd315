"""One mock policy that plays all three roles of the support chat, deterministically.

* As the **agent** (requests whose session is a rollout, ending in ``r<k>``) it follows
  one of four styles chosen from the order id and ``k``: careful (looks the order up, then
  refunds a lost parcel or tells the customer what the tool said), asks first (asks for
  the order number although the customer gave it, then careful), sloppy (promises a
  refund without any tool), or overeager (looks up, then tries to refund whatever the
  status and claims success even when the tool refused).
* As the **customer** (requests whose system prompt is ``SimulatedUser``'s) it gives its
  order number when asked and ends the chat with the stop marker once the agent has
  answered about refunds or delivery.
* As the **judge** (a rubric prompt over a conversation) it grades with simple checks
  of the transcript and writes a remark before its JSON verdict.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from benchmax.testing import RecordedRequest, message_text

_ORDER_ID = re.compile(r"\b([A-Z]\d{2})\b")
_TITLE = re.compile(r"Criterion title:\s*(.+)")
STYLES = ("careful", "asks_first", "sloppy", "overeager")


def rollout_index(request: RecordedRequest) -> int:
    match = re.search(r"\.r(\d+)$", request.session)
    return int(match.group(1)) if match else 0


def respond(body: dict[str, Any], request: RecordedRequest) -> str | dict[str, Any]:
    messages = body["messages"]
    last = message_text(messages[-1].get("content"))
    if "Criterion title:" in last:
        return grade(last)
    first = messages[0]
    if first.get("role") == "system" and "role-playing a user" in message_text(first["content"]):
        return customer(messages)
    return agent(messages, rollout_index(request))


def style_for(order_id: str, k: int) -> str:
    seed = int(hashlib.sha256(order_id.encode()).hexdigest()[:4], 16)
    if seed % 3 == 0:  # some customers always meet the careful agent
        return "careful"
    return STYLES[(seed + k) % len(STYLES)]


def _tool_results(messages: list[dict[str, Any]]) -> dict[str, str]:
    """The content of the last result of each tool, by tool name."""
    names = {
        call["id"]: call["function"]["name"]
        for message in messages
        for call in message.get("tool_calls") or ()
    }
    return {
        names.get(message.get("tool_call_id"), "?"): message_text(message.get("content"))
        for message in messages
        if message.get("role") == "tool"
    }


def _call(name: str, **arguments: str) -> dict[str, Any]:
    return {"content": None, "tool_calls": [{"name": name, "arguments": arguments}]}


def agent(messages: list[dict[str, Any]], k: int) -> str | dict[str, Any]:
    customer_text = " ".join(
        message_text(m.get("content")) for m in messages if m.get("role") == "user"
    )
    found = _ORDER_ID.findall(customer_text)
    order_id = found[-1] if found else "A17"
    style = style_for(order_id, k)
    answered = any(m.get("role") == "assistant" for m in messages)
    if style == "sloppy":
        return (
            f"I'm so sorry about that! I've issued a full refund for order {order_id}; "
            "it will be in your account within 24 hours."
        )
    if style == "asks_first" and not answered:
        return "I'm sorry to hear that. Could you give me your order number, please?"
    results = _tool_results(messages)
    if "lookup_order" not in results:
        return _call("lookup_order", order_id=order_id)
    order = json.loads(results["lookup_order"])
    if order["status"] == "lost" or style == "overeager":
        if "issue_refund" not in results:
            return _call("issue_refund", order_id=order_id, reason="the parcel did not arrive")
        if style == "overeager" and "refund issued" not in results["issue_refund"]:
            return f"Done! I've refunded order {order_id} in full; sorry for the trouble."
        return (
            f"I checked: the carrier lost order {order_id}, {order['item']}. I've issued a "
            "full refund; you'll see it in 3-5 working days."
        )
    return f"Order {order_id} ({order['item']}) was checked: {order['note']}."


def customer(messages: list[dict[str, Any]]) -> str:
    order_id = (_ORDER_ID.findall(message_text(messages[0]["content"])) or ["A17"])[0]
    said = message_text(messages[-1].get("content")).lower()
    if "order number" in said:
        return f"It's order {order_id}."
    if any(word in said for word in ("refund", "delivered", "expected", "transit")):
        return "Thank you, that's all I needed. ###STOP###"
    return f"Could you please check order {order_id}?"


def grade(prompt: str) -> str:
    title_match = _TITLE.search(prompt)
    title = title_match.group(1).strip().lower() if title_match else ""
    conversation = prompt.split("marked):\n", 1)[-1].rsplit("\n\nScoring:", 1)[0]
    looked_up = "[tool result lookup_order]" in conversation
    refunded = "refund issued for order" in conversation
    said = " ".join(
        block.partition("\n")[2]
        for block in conversation.split("\n\n")
        if block.startswith("[assistant]")
    ).lower()
    promised = "refund" in said and ("issued" in said or "refunded" in said)
    if title == "grounded":
        score = int(looked_up)
        reasoning = (
            "the agent looked the order up before telling the customer about it"
            if looked_up
            else "no tool result backs what the agent told the customer"
        )
    else:  # unsupported promise: 1 means the flaw is present
        score = int(promised and not refunded)
        reasoning = (
            "the agent claimed a refund that no tool result confirms"
            if score
            else "every promise is backed by a tool result"
        )
    blocks = conversation.count("\n\n[") + 1
    remark = f"Read {blocks} messages of the conversation."
    return remark + "\n" + json.dumps({"score": score, "reasoning": reasoning})
