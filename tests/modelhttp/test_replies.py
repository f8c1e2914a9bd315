"""``benchmax._modelhttp.replies``: every reply shape a server may send, read as data."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from benchmax._modelhttp.replies import (
    FINISH_REASONS,
    Reply,
    ReplyFailure,
    ToolCall,
    add_usage,
    bounded_repr,
    finish_reason_table,
    message_has_text,
    read_reply,
    reply_usage,
)

MESSAGE = "choices[0].message"


def completion(message: Any, finish_reason: Any = "stop", **extra: Any) -> dict[str, Any]:
    """A chat.completion body whose first choice carries ``message``."""
    choice = {"index": 0, "message": message, "finish_reason": finish_reason}
    return {"id": "c", "object": "chat.completion", "choices": [choice], **extra}


def calling(*calls: Any, content: Any = None, **message: Any) -> dict[str, Any]:
    return completion(
        {"role": "assistant", "content": content, "tool_calls": list(calls), **message},
        "tool_calls",
    )


def call(name: Any = "multiply", arguments: Any = '{"left":6}', **fields: Any) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "arguments": arguments}, **fields}


def ok(body: Any, **options: Any) -> Reply:
    reply = read_reply(body, **options)
    assert isinstance(reply, Reply), reply
    return reply


def failure(body: Any, **options: Any) -> ReplyFailure:
    reply = read_reply(body, **options)
    assert isinstance(reply, ReplyFailure), reply
    assert reply.termination_reason == "model_error"
    return reply


# -- well-formed replies keep the 0.2 transcript ---------------------------------------------------


def test_text_reply_is_the_0_2_message() -> None:
    body = completion({"role": "assistant", "content": "42", "refusal": None, "audio": None})
    reply = ok(body)
    assert reply.message == {"role": "assistant", "content": "42"}
    assert list(reply.message) == ["role", "content"]
    assert reply.message_without_reasoning is reply.message
    assert reply.tool_calls == ()
    assert reply.termination_reason == "finished"
    assert reply.finish_reason == "stop"
    assert reply.finish_note is None
    assert reply.usage is None


@pytest.mark.parametrize(
    "content",
    [
        None,
        "",
        [{"type": "text", "text": "4"}, {"type": "text", "text": "2"}],
        [{"type": "thinking", "thinking": "hm"}, {"type": "text", "text": "42"}],
        [],
    ],
)
def test_content_is_kept_as_sent(content: Any) -> None:
    reply = ok(completion({"role": "assistant", "content": content}))
    assert reply.message == {"role": "assistant", "content": content}


def test_missing_content_is_null_and_role_is_always_assistant() -> None:
    reply = ok(completion({"role": "model"}))
    assert reply.message == {"role": "assistant", "content": None}


@pytest.mark.parametrize("content", [5, 1.5, True, {"text": "42"}])
def test_content_of_another_kind_is_model_error(content: Any) -> None:
    reply = failure(completion({"role": "assistant", "content": content}))
    assert reply.message == (
        f"{MESSAGE}.content must be a string, null or a list of parts, got {content!r}"
    )


def test_function_tool_calls_are_normalized_in_order() -> None:
    body = calling(
        call(id="a", arguments='{"left": 6, "right": 7}'),
        call("add", "{}", id="b"),
        content="let me compute",
    )
    reply = ok(body)
    assert reply.tool_calls == (
        ToolCall(id="a", name="multiply", arguments={"left": 6, "right": 7}),
        ToolCall(id="b", name="add", arguments={}),
    )
    assert reply.message == {
        "role": "assistant",
        "content": "let me compute",
        "tool_calls": [
            {
                "id": "a",
                "type": "function",
                "function": {"name": "multiply", "arguments": '{"left": 6, "right": 7}'},
            },
            {"id": "b", "type": "function", "function": {"name": "add", "arguments": "{}"}},
        ],
    }
    assert list(reply.message) == ["role", "content", "tool_calls"]
    assert reply.termination_reason is None
    assert reply.finish_reason == "tool_calls"
    assert reply.finish_note is None


@pytest.mark.parametrize("finish_reason", ["stop", None, "weird", 7, "tool_calls"])
def test_finish_reason_is_ignored_when_there_are_tool_calls(finish_reason: Any) -> None:
    """Outside the output-limit family (beyond.md §9 amends §7 for that family)."""
    body = calling(call(id="a"))
    body["choices"][0]["finish_reason"] = finish_reason
    reply = ok(body)
    assert reply.termination_reason is None and reply.finish_note is None
    assert reply.finish_reason == finish_reason


@pytest.mark.parametrize("calls", [None, []])
def test_null_or_empty_tool_calls_are_no_calls(calls: Any) -> None:
    reply = ok(completion({"role": "assistant", "content": "42", "tool_calls": calls}))
    assert reply.tool_calls == ()
    assert reply.message == {"role": "assistant", "content": "42"}


def test_only_the_first_choice_counts() -> None:
    body = completion({"role": "assistant", "content": "first"})
    body["choices"].append("not even an object")
    assert ok(body).message["content"] == "first"


# -- replies that cannot continue a rollout --------------------------------------------------------


@pytest.mark.parametrize("body", [[], [{"choices": []}], "text", 42, None, True])
def test_a_body_that_is_not_an_object_is_model_error(body: Any) -> None:
    assert failure(body).message == f"the response must be a JSON object, got {body!r}"


@pytest.mark.parametrize("body", [{}, {"choices": []}, {"choices": None}, {"id": "x"}])
def test_no_choices_keeps_the_0_2_message(body: Any) -> None:
    assert failure(body).message == "response contained no choices"


def test_no_choices_with_an_error_object_shows_the_error() -> None:
    body = {"error": {"message": "upstream overloaded", "code": 503}}
    assert failure(body).message == (
        "response contained no choices; error: {'message': 'upstream overloaded', 'code': 503}"
    )


@pytest.mark.parametrize("choices", [{"0": {}}, "abc", 3, True])
def test_choices_that_are_not_a_list_are_model_error(choices: Any) -> None:
    assert failure({"choices": choices}).message == f"choices must be a list, got {choices!r}"


@pytest.mark.parametrize("choice", [None, "stop", 1, ["message"]])
def test_a_choice_that_is_not_an_object_is_model_error(choice: Any) -> None:
    assert failure({"choices": [choice]}).message == (
        f"choices[0] must be an object, got {choice!r}"
    )


@pytest.mark.parametrize("message", [None, "42", 0, ["role"]])
def test_a_message_that_is_not_an_object_is_model_error(message: Any) -> None:
    assert failure(completion(message)).message == (f"{MESSAGE} must be an object, got {message!r}")


def test_a_choice_without_message_is_model_error() -> None:
    body = {"choices": [{"index": 0, "delta": {"content": "4"}, "finish_reason": None}]}
    assert failure(body).message == f"{MESSAGE} must be an object, got None"


def test_tool_calls_object_instead_of_list_is_model_error() -> None:
    # Issue 9 §1: "tool_calls": {"id": "c1", "function": {...}}.
    calls = {"id": "c1", "function": {"name": "multiply", "arguments": "{}"}}
    reply = failure(completion({"role": "assistant", "content": None, "tool_calls": calls}))
    assert reply.message == (
        f"{MESSAGE}.tool_calls must be a list, got "
        "{'id': 'c1', 'function': {'name': 'multiply', 'arguments': '{}'}}"
    )


@pytest.mark.parametrize("calls", ["multiply", 1, True])
def test_tool_calls_of_other_kinds_are_model_error(calls: Any) -> None:
    reply = failure(completion({"role": "assistant", "tool_calls": calls}))
    assert reply.message == f"{MESSAGE}.tool_calls must be a list, got {calls!r}"


@pytest.mark.parametrize("entry", [None, "multiply", 3, [call()]])
def test_a_call_that_is_not_an_object_is_model_error(entry: Any) -> None:
    reply = failure(calling(call(id="a"), entry))
    assert reply.message == f"{MESSAGE}.tool_calls[1] must be an object, got {entry!r}"


@pytest.mark.parametrize("function", [None, "multiply", ["multiply"], 0])
def test_a_call_whose_function_is_not_an_object_is_model_error(function: Any) -> None:
    # Issue 9 §1: a call with "function": null.
    reply = failure(calling({"id": "c1", "type": "function", "function": function}))
    assert reply.message == (
        f"{MESSAGE}.tool_calls[0].function must be an object, got {function!r}"
    )


def test_a_call_without_function_is_model_error() -> None:
    reply = failure(calling({"id": "c1", "type": "function"}))
    assert reply.message == f"{MESSAGE}.tool_calls[0].function must be an object, got None"


@pytest.mark.parametrize("call_type", ["custom", "FUNCTION", "", 1, {"kind": "function"}])
def test_a_call_of_another_type_is_model_error(call_type: Any) -> None:
    reply = failure(calling(call(id="c1", type=call_type)))
    assert reply.message == (
        f"{MESSAGE}.tool_calls[0].type must be 'function' (a function tool call), got {call_type!r}"
    )


@pytest.mark.parametrize("fields", [{}, {"type": None}], ids=["missing", "null"])
def test_a_call_without_type_is_a_function_call(fields: dict[str, Any]) -> None:
    # Issue 9 §1: a call without "type" (0.2 raised TypeError out of run_group).
    entry = {"id": "c1", "function": {"name": "multiply", "arguments": "{}"}, **fields}
    reply = ok(calling(entry))
    assert reply.tool_calls == (ToolCall("c1", "multiply", {}),)
    assert reply.message["tool_calls"][0]["type"] == "function"


@pytest.mark.parametrize("name", [None, 5, ["multiply"], {"name": "multiply"}])
def test_a_name_that_is_not_a_string_is_model_error(name: Any) -> None:
    reply = failure(calling(call(name, id="c1")))
    assert reply.message == (
        f"{MESSAGE}.tool_calls[0].function.name must be a string, got {name!r}"
    )


def test_the_first_unusable_call_is_reported_even_after_good_ones() -> None:
    reply = failure(calling(call(id="a"), call(id="b"), {"id": "c", "function": None}))
    assert reply.message.startswith(f"{MESSAGE}.tool_calls[2].function")


# -- tool-call arguments ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "text", "arguments"),
    [
        ('{"left": 6}', '{"left": 6}', {"left": 6}),
        ("", "", {}),
        (None, "{}", {}),
        ({"left": 6, "right": 7}, '{"left":6,"right":7}', {"left": 6, "right": 7}),
        ({}, "{}", {}),
        ({"word": "häus"}, '{"word":"häus"}', {"word": "häus"}),
        ({"nested": {"a": [1, None]}}, '{"nested":{"a":[1,null]}}', {"nested": {"a": [1, None]}}),
        ("[6, 7]", "[6, 7]", "Tool arguments must be a JSON object."),
        ([6, 7], "[6,7]", "Tool arguments must be a JSON object."),
        (5, "5", "Tool arguments must be a JSON object."),
        (True, "true", "Tool arguments must be a JSON object."),
        ('"text"', '"text"', "Tool arguments must be a JSON object."),
        (
            "{bad",
            "{bad",
            "Invalid JSON tool arguments: Expecting property name enclosed in double quotes",
        ),
        ("[" * 100_000, "[" * 100_000, "Invalid JSON tool arguments: nested too deeply"),
    ],
)
def test_arguments_are_parsed_or_answered(raw: Any, text: str, arguments: Any) -> None:
    reply = ok(calling(call(arguments=raw, id="c1")))
    assert reply.tool_calls == (ToolCall("c1", "multiply", arguments),)
    assert reply.message["tool_calls"][0]["function"] == {"name": "multiply", "arguments": text}


def test_missing_arguments_are_an_empty_object() -> None:
    reply = ok(calling({"id": "c1", "function": {"name": "multiply"}}))
    assert reply.tool_calls == (ToolCall("c1", "multiply", {}),)
    assert reply.message["tool_calls"][0]["function"]["arguments"] == "{}"


def test_arguments_that_cannot_be_json_are_model_error() -> None:
    reply = failure(calling(call(arguments={"x": object()}, id="c1")))
    assert reply.message.startswith(
        f"{MESSAGE}.tool_calls[0].function.arguments must be JSON text or a JSON value, got "
    )


# -- call ids --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw_ids", "taken", "ids"),
    [
        (["a", "b"], (), ["a", "b"]),
        ([None, None], (), ["call_1", "call_2"]),
        (["", 7], (), ["call_1", "call_2"]),
        (["a", "a", "a"], (), ["a", "call_1", "call_2"]),
        ([None, "call_1"], (), ["call_2", "call_1"]),
        (["a", None], ("a", "b"), ["call_3", "call_4"]),
        (["call_3", None], ("x", "y"), ["call_3", "call_4"]),
        ([["list"], {"id": 1}, True], (), ["call_1", "call_2", "call_3"]),
    ],
)
def test_missing_empty_or_duplicate_ids_get_unique_generated_ones(
    raw_ids: list[Any], taken: tuple[str, ...], ids: list[str]
) -> None:
    calls = [call(id=raw) if raw is not None else call() for raw in raw_ids]
    reply = ok(calling(*calls), taken_ids=taken)
    assert [c.id for c in reply.tool_calls] == ids
    assert [c["id"] for c in reply.message["tool_calls"]] == ids
    assert len(set(ids) | set(taken)) == len(ids) + len(taken)


# -- reasoning -------------------------------------------------------------------------------------


def test_reasoning_fields_are_kept_apart_from_the_0_2_message() -> None:
    message = {
        "role": "assistant",
        "content": "42",
        "reasoning": {"summary": "6*7"},
        "reasoning_content": "6 times 7 is 42",
    }
    reply = ok(completion(message))
    assert reply.message == {
        "role": "assistant",
        "content": "42",
        "reasoning_content": "6 times 7 is 42",
        "reasoning": {"summary": "6*7"},
    }
    assert list(reply.message) == ["role", "content", "reasoning_content", "reasoning"]
    assert reply.message_without_reasoning == {"role": "assistant", "content": "42"}


def test_reasoning_with_tool_calls_comes_before_the_calls() -> None:
    reply = ok(calling(call(id="c1"), reasoning_content="need a tool"))
    assert list(reply.message) == ["role", "content", "reasoning_content", "tool_calls"]
    assert list(reply.message_without_reasoning) == ["role", "content", "tool_calls"]
    assert reply.message["tool_calls"] == reply.message_without_reasoning["tool_calls"]


def test_null_reasoning_is_dropped() -> None:
    reply = ok(completion({"role": "assistant", "content": "x", "reasoning_content": None}))
    assert reply.message == {"role": "assistant", "content": "x"}
    assert reply.message is reply.message_without_reasoning


@pytest.mark.parametrize("value", ["", [], 0])
def test_non_null_reasoning_is_kept_as_sent(value: Any) -> None:
    reply = ok(completion({"role": "assistant", "content": "x", "reasoning": value}))
    assert reply.message["reasoning"] == value


# -- the finish_reason table -----------------------------------------------------------------------

TABLE_ROWS = [
    ("stop", "finished"),
    ("eos", "finished"),
    ("eos_token", "finished"),
    ("end_turn", "finished"),
    ("stop_sequence", "finished"),
    ("length", "output_exceeded"),
    ("max_tokens", "output_exceeded"),
    ("model_length", "output_exceeded"),
    ("max_output_tokens", "output_exceeded"),
    ("content_filter", "content_filter"),
    ("safety", "content_filter"),
    ("recitation", "content_filter"),
    ("prohibited_content", "content_filter"),
    ("error", "model_error"),
    ("tool_calls", "finished"),
    ("function_call", "finished"),
]


def test_the_default_table_is_exactly_the_documented_one() -> None:
    assert dict(FINISH_REASONS) == dict(TABLE_ROWS)


@pytest.mark.parametrize(("raw", "reason"), TABLE_ROWS)
@pytest.mark.parametrize("case", [str.lower, str.upper, str.title])
def test_every_row_maps_case_insensitively(raw: str, reason: str, case: Any) -> None:
    sent = case(raw)
    reply = ok(completion({"role": "assistant", "content": "42"}, sent))
    assert reply.termination_reason == reason
    assert reply.finish_reason == sent
    if raw == "stop" and reason == "finished":
        assert reply.finish_note is None
    else:
        assert reply.finish_note == f"finish_reason {sent!r} maps to {reason}"


@pytest.mark.parametrize("finish_reason", [None, ""])
@pytest.mark.parametrize(
    ("content", "reason", "note"),
    [
        ("42", "finished", "with message text"),
        ([{"type": "text", "text": "42"}], "finished", "with message text"),
        (None, "model_error", "and no message text"),
        ("", "model_error", "and no message text"),
        ([], "model_error", "and no message text"),
        ([{"type": "text", "text": ""}], "model_error", "and no message text"),
        ([{"type": "image_url", "image_url": {"url": "x"}}], "model_error", "and no message text"),
        # An untyped part with text is text, by the one rule message_text reads with.
        ([{"text": "no type"}], "finished", "with message text"),
        (["plain"], "finished", "with message text"),
        ([{"type": "refusal", "refusal": "no"}], "model_error", "and no message text"),
    ],
)
def test_null_or_empty_finish_reason_depends_on_text(
    finish_reason: Any, content: Any, reason: str, note: str
) -> None:
    # Issue 9 §1: "finish_reason": "" raised ValueError out of run_group in 0.2.
    reply = ok(completion({"role": "assistant", "content": content}, finish_reason))
    assert reply.termination_reason == reason
    assert reply.finish_note == f"finish_reason {finish_reason!r} {note}"


def test_reasoning_alone_is_not_message_text() -> None:
    message = {"role": "assistant", "content": None, "reasoning_content": "thinking..."}
    assert ok(completion(message, None)).termination_reason == "model_error"


@pytest.mark.parametrize(
    "finish_reason", ["weird", "stopped", " stop", 0, True, ["stop"], {"a": 1}]
)
def test_unmapped_finish_reasons_are_model_error(finish_reason: Any) -> None:
    reply = ok(completion({"role": "assistant", "content": "42"}, finish_reason))
    assert reply.termination_reason == "model_error"
    assert reply.finish_note == (
        f"finish_reason {finish_reason!r} is not in the finish_reason table"
    )


def test_a_missing_finish_reason_is_null() -> None:
    body = {"choices": [{"message": {"role": "assistant", "content": "42"}}]}
    reply = ok(body)
    assert reply.finish_reason is None and reply.termination_reason == "finished"


def test_a_huge_finish_reason_is_shown_bounded() -> None:
    reply = ok(completion({"role": "assistant", "content": "x"}, "z" * 10_000))
    assert reply.finish_note is not None and len(reply.finish_note) < 400


# -- environment overrides of the table ------------------------------------------------------------


def test_overrides_add_and_replace_rows_case_insensitively() -> None:
    table = finish_reason_table({"Done": "finished", "length": "finished", "EOS": "weird_stop"})
    assert table["done"] == "finished"
    assert table["length"] == "finished"
    assert table["eos"] == "weird_stop"
    assert table["stop"] == "finished"
    for sent, reason in [("DONE", "finished"), ("Length", "finished"), ("eos", "weird_stop")]:
        reply = ok(completion({"role": "assistant", "content": "x"}, sent), finish_reasons=table)
        assert reply.termination_reason == reason
    assert dict(FINISH_REASONS)["length"] == "output_exceeded"  # the default is unchanged


def test_an_override_of_the_empty_value_beats_the_text_rule() -> None:
    table = finish_reason_table({"": "output_exceeded"})
    reply = ok(completion({"role": "assistant", "content": "x"}, ""), finish_reasons=table)
    assert reply.termination_reason == "output_exceeded"
    reply = ok(completion({"role": "assistant", "content": "x"}, None), finish_reasons=table)
    assert reply.termination_reason == "finished"


def test_overriding_stop_is_logged_like_any_other_mapping() -> None:
    table = finish_reason_table({"stop": "output_exceeded"})
    reply = ok(completion({"role": "assistant", "content": "x"}), finish_reasons=table)
    assert reply.termination_reason == "output_exceeded"
    assert reply.finish_note == "finish_reason 'stop' maps to output_exceeded"


def test_no_overrides_is_the_default_table() -> None:
    assert finish_reason_table({}) is FINISH_REASONS


@pytest.mark.parametrize(
    ("overrides", "error", "message"),
    [
        ([("eos", "finished")], TypeError, "finish_reasons must be a mapping"),
        ("eos", TypeError, "finish_reasons must be a mapping"),
        ({1: "finished"}, TypeError, "finish_reasons keys must be strings"),
        ({"eos": ""}, ValueError, r"finish_reasons\['eos'\] must be a termination reason"),
        ({"eos": "  "}, ValueError, r"finish_reasons\['eos'\] must be a termination reason"),
        ({"eos": None}, ValueError, r"finish_reasons\['eos'\] must be a termination reason"),
        ({"eos": 1}, ValueError, r"finish_reasons\['eos'\] must be a termination reason"),
    ],
)
def test_overrides_are_validated(overrides: Any, error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message):
        finish_reason_table(overrides)


# -- usage -----------------------------------------------------------------------------------------


def test_usage_reads_counts_and_details() -> None:
    usage = {
        "prompt_tokens": 10,
        "completion_tokens": 5,
        "total_tokens": 15,
        "completion_tokens_details": {"reasoning_tokens": 3, "audio_tokens": 0},
        "prompt_tokens_details": {"cached_tokens": 8},
        "extra": 99,
    }
    assert reply_usage({"usage": usage}) == {
        "prompt_tokens": 10,
        "completion_tokens": 5,
        "total_tokens": 15,
        "reasoning_tokens": 3,
        "cached_tokens": 8,
    }
    assert ok(completion({"content": "x"}, usage=usage)).usage == reply_usage({"usage": usage})


@pytest.mark.parametrize(
    ("usage", "expected"),
    [
        ({"prompt_tokens": 10}, {"prompt_tokens": 10}),
        ({"prompt_tokens": 0, "completion_tokens": None}, {"prompt_tokens": 0}),
        ({"prompt_tokens": 12.0, "completion_tokens": 1.5}, {"prompt_tokens": 12}),
        ({"prompt_tokens": True, "completion_tokens": -1, "total_tokens": "3"}, None),
        ({"completion_tokens_details": None, "prompt_tokens_details": []}, None),
        ({"completion_tokens_details": {"reasoning_tokens": 2}}, {"reasoning_tokens": 2}),
        ({}, None),
        (None, None),
        ("10 tokens", None),
        ([1, 2], None),
    ],
)
def test_usage_fields_not_reported_stay_absent(usage: Any, expected: Any) -> None:
    assert reply_usage({"usage": usage}) == expected


@pytest.mark.parametrize("body", [None, [], "x", {}, {"choices": []}])
def test_no_usage_is_none(body: Any) -> None:
    assert reply_usage(body) is None


def test_a_failed_reply_still_reports_its_usage() -> None:
    body = {"choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": 0}}
    assert failure(body).usage == {"prompt_tokens": 7, "completion_tokens": 0}


@pytest.mark.parametrize(
    ("total", "more", "expected"),
    [
        (None, None, None),
        (None, {"prompt_tokens": 1}, {"prompt_tokens": 1}),
        ({"prompt_tokens": 1}, None, {"prompt_tokens": 1}),
        (
            {"prompt_tokens": 1, "total_tokens": 3},
            {"prompt_tokens": 2, "cached_tokens": 5},
            {"prompt_tokens": 3, "total_tokens": 3, "cached_tokens": 5},
        ),
    ],
)
def test_add_usage_sums_key_wise(total: Any, more: Any, expected: Any) -> None:
    before = None if total is None else dict(total)
    assert add_usage(total, more) == expected
    assert total == before  # never mutated


# -- values ----------------------------------------------------------------------------------------


def test_reply_values_are_frozen() -> None:
    reply = ok(calling(call(id="c1")))
    with pytest.raises(dataclasses.FrozenInstanceError):
        reply.termination_reason = "finished"  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        reply.tool_calls[0].name = "x"  # type: ignore[misc]


@pytest.mark.parametrize(
    "value",
    ["x" * 10_000, list(range(10_000)), {str(i): i for i in range(10_000)}, [[[[[[[1]]]]]]]],
)
def test_bounded_repr_is_bounded(value: Any) -> None:
    text = bounded_repr(value)
    assert len(text) <= 300
    assert "..." in text


def test_bounded_repr_of_small_values_is_their_repr() -> None:
    assert bounded_repr({"a": [1, None]}) == "{'a': [1, None]}"
    assert bounded_repr("\x1b[31m") == "'\\x1b[31m'"


@pytest.mark.parametrize(
    ("content", "has_text"),
    [
        ("x", True),
        ("", False),
        (None, False),
        ([{"type": "text", "text": "x"}], True),
        (3, False),
        # the same rule as benchmax.rewards.text.message_text: untyped parts and strings
        (["x"], True),
        ([{"text": "x"}], True),
        ([{"type": "image_url", "image_url": {"url": "u"}}, {"type": "text", "text": ""}], False),
    ],
)
def test_message_has_text(content: Any, has_text: bool) -> None:
    assert message_has_text(content) is has_text


@pytest.mark.parametrize("finish_reason", ["length", "LENGTH", "max_tokens", "model_length"])
@pytest.mark.parametrize("arguments", ['{"a": 1, "b": 2}', '{"a": 1, "b', None])
def test_tool_calls_cut_by_the_output_limit_are_output_exceeded(
    finish_reason: str, arguments: Any
) -> None:
    """beyond.md §9: a reply of the output-limit family carrying tool calls (arguments
    complete or truncated JSON) ends as output_exceeded; the calls stay in the message."""
    body = calling(call(id="a", arguments=arguments))
    body["choices"][0]["finish_reason"] = finish_reason
    reply = ok(body)
    assert reply.termination_reason == "output_exceeded"
    assert reply.finish_note is not None and "cut the reply inside tool calls" in reply.finish_note
    assert [c.id for c in reply.tool_calls] == ["a"]
    assert reply.message["tool_calls"][0]["id"] == "a"


def test_an_environment_row_puts_a_finish_reason_in_the_output_limit_family() -> None:
    body = calling(call(id="a"))
    body["choices"][0]["finish_reason"] = "truncated"
    table = finish_reason_table({"truncated": "output_exceeded"})
    assert ok(body, finish_reasons=table).termination_reason == "output_exceeded"
    assert ok(body).termination_reason is None  # not in the default table: calls run
