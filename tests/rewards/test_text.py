"""Message text as models write it (beyond.md §7): content parts, and reasoning."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from benchmax.rewards import text as text_module
from benchmax.rewards.text import message_text, reasoning_finished, without_reasoning

# --- message_text ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("  plain  ", "  plain  "),
        ("", ""),
        (None, ""),
        ([], ""),
        (
            [{"type": "text", "text": "<answer>"}, {"type": "text", "text": "4</answer>"}],
            "<answer>4</answer>",
        ),
        ([{"text": "no type "}, "plain string part"], "no type plain string part"),
        (
            [
                {"type": "thinking", "thinking": "draft"},
                {"type": "reasoning", "text": "draft"},
                {"type": "image_url", "image_url": {"url": "data:"}},
                {"type": "refusal", "refusal": "no"},
                {"type": "text", "text": "kept"},
            ],
            "kept",
        ),
        (({"type": "text", "text": "a"}, {"type": "text", "text": "b"}), "ab"),
        ([{"type": "text", "text": None}, {"type": "text"}, None, 7, ["nested"]], ""),
        ([{"type": "TEXT", "text": "case matters"}], ""),
        (7, ""),
        ({"type": "text", "text": "a bare part is not a list"}, ""),
        (b"bytes", ""),
    ],
)
def test_message_text(content: Any, expected: str) -> None:
    assert message_text(content) == expected


@given(st.lists(st.text(max_size=8), max_size=5))
def test_message_text_of_text_parts_is_their_concatenation(texts: list[str]) -> None:
    parts = [{"type": "text", "text": text} for text in texts]
    assert message_text(parts) == "".join(texts)
    assert message_text("".join(texts)) == "".join(texts)


# --- reasoning -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "answer", "finished"),
    [
        ("no reasoning", "no reasoning", True),
        ("", "", True),
        ("<think>private</think> answer", " answer", True),
        ("a<think>x</think>b<think>y</think>c", "abc", True),
        ("draft 12</think> final 42", " final 42", True),  # template opened the block itself
        ("one</think>two</think>three", "three", True),  # the last lone close wins
        ("<think>x</think>between</think>after", "after", True),
        ("<think>draft", "", False),
        ("answer <think>cut off", "answer ", False),
        ("<think>a</think>b<think>cut", "b", False),
        ("<think>outer <think>nested</think> tail", " tail", True),  # nesting does not count
        # beyond.md §9: any case, with spaces or attributes
        ("<THINK>upper</THINK>a", "a", True),
        ("<think >spaced</think >a", "a", True),
        ('<Think kind="plan">x</think>a', "a", True),
        ("<THINK>open", "", False),
        ("<thinking>other tag</thinking>", "<thinking>other tag</thinking>", True),
        ("<think-x>other</think-x>", "<think-x>other</think-x>", True),
        ("<think>\nmulti\nline\n</think>\n\nok", "\n\nok", True),
    ],
)
def test_without_reasoning_and_reasoning_finished(text: str, answer: str, finished: bool) -> None:
    assert without_reasoning(text) == answer
    assert reasoning_finished(text) is finished


# No letter of "think" in the alphabet, so no concatenation can form a tag.
reasoning_free = st.text(alphabet="abc <>/{}\n", max_size=12)


@given(before=reasoning_free, thought=reasoning_free, after=reasoning_free)
def test_reasoning_is_removed_wherever_it_is(before: str, thought: str, after: str) -> None:
    assert without_reasoning(before + after) == before + after
    assert without_reasoning(f"{before}<think>{thought}</think>{after}") == before + after
    assert without_reasoning(f"{before}{thought}</think>{after}") == after
    assert without_reasoning(f"{before}<think>{thought}") == before
    assert reasoning_finished(f"{before}<think>{thought}") is False
    assert reasoning_finished(f"{before}<think>{thought}</think>{after}") is True


def test_module_surface() -> None:
    assert text_module.__all__ == ["message_text", "reasoning_finished", "without_reasoning"]
    for name in text_module.__all__:
        assert getattr(text_module, name).__module__ == "benchmax.rewards.text"
