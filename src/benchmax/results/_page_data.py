"""The data the ``view`` page embeds (format ``benchmax.view/1``), built one group at a time.

A group is first taken into a ``GroupEntry`` (``group_entry``): what the page shows of it,
with each rollout's termination reason and rewards as they are, so entries can be made as
groups complete, in any order, and kept (or spooled) until the whole file is read. Once
the reward keys and reasons of the file are known (``ReportTally``), ``compacted`` turns an
entry into the page's compact form: rewards as a list in ``keys`` order, the reason as an
index into ``reasons``, the messages every rollout of a group starts with (the prompt)
stored once per group as ``p``. An entry made with ``transcripts=False`` (a group beyond
the page's transcript budget) keeps rewards, reasons, timings and usage and marks the group
``"x": true`` (no ``p`` content, no messages, logs, tokens or annotations).

``embedded_pieces`` writes the data as JSON text safe inside a ``<script>`` element, piece
by piece, so a large page is written without holding its text.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, NotRequired, TypedDict

from benchmax._vocabulary import TOKEN_USAGE_KEYS
from benchmax.results._learning_signal import group_signal, scalar_of
from benchmax.results._records import reward_weights_of
from benchmax.results._report import ReportTally, UsageStats
from benchmax.stitching import TokenCoverage
from benchmax.trajectory import Trajectory

__all__ = [
    "DATA_FORMAT",
    "GroupEntry",
    "compacted",
    "add_to",
    "data_head",
    "embedded_json",
    "embedded_pieces",
    "group_entry",
    "reward_weights_of",
]

DATA_FORMAT = "benchmax.view/1"

_TRANSCRIPT_FIELDS = ("m", "l", "k", "an")
"""A rollout's fields that ``transcripts=False`` leaves out, in the page's order."""


class RolloutEntry(TypedDict):
    """One rollout as ``group_entry`` takes it (``t``/``w`` not yet compacted)."""

    g: int
    id: str
    a: int
    t: str
    w: dict[str, float]
    tm: dict[str, float]
    u: dict[str, object] | None
    s: float | None
    """The weighted scalar reward."""
    v: float | None
    """The GRPO advantage over the group's scored rollouts."""
    m: NotRequired[list[Mapping[str, Any]] | None]
    l: NotRequired[list[object]]  # noqa: E741  (the page's name for the logs)
    k: NotRequired[dict[str, list[object]]]
    an: NotRequired[dict[str, Any]]
    cv: NotRequired[dict[str, Any]]
    """The rollout's token coverage (``TokenCoverage.to_json``), when it recorded ids."""


class GroupEntry(TypedDict):
    """One complete group as the page shows it (``compacted`` gives its embedded form)."""

    i: int
    id: str
    f: bool
    p: list[Mapping[str, Any]]
    r: list[RolloutEntry]
    s: NotRequired[int]
    x: NotRequired[bool]
    """Set when the group's transcripts were left out of the page."""


def group_entry(
    rollouts: Sequence[Trajectory],
    *,
    weights: Mapping[str, float] | None,
    tokens: bool = False,
    transcripts: bool = True,
) -> GroupEntry:
    """The page's entry of one complete group (``rollouts`` in group order): each rollout's
    identity, reason, rewards, timings, usage, weighted scalar and advantage and, with
    ``transcripts``, its messages after the shared prompt, logs, per-turn tokens (ids and
    logprobs too with ``tokens``) and annotations."""
    first = rollouts[0]
    scalars = [scalar_of(record.rewards, weights) for record in rollouts]
    advantages = group_signal(scalars, [record.termination_reason for record in rollouts])
    prompt: list[Mapping[str, Any]] = []
    if transcripts:
        messages = [r.messages for r in rollouts]
        if all(m is not None for m in messages):
            prompt = _shared_prefix([m for m in messages if m is not None])
    entries = []
    for record, scalar, advantage in zip(rollouts, scalars, advantages, strict=True):
        entry: RolloutEntry = {
            "g": record.group_index,
            "id": record.rollout_id,
            "a": record.attempt,
            "t": record.termination_reason,
            "w": dict(record.rewards),
            "tm": dict(record.timings),
            "u": None if record.usage is None else dict(record.usage),
            "s": scalar,
            "v": advantage,
        }
        coverage = record.coverage
        if coverage is not None:
            entry["cv"] = dict(coverage.to_json())
        if transcripts:
            _add_transcript(entry, record, len(prompt), tokens)
        entries.append(entry)
    group: GroupEntry = {
        "i": first.example_index or 0,
        "id": first.example_id,
        "f": all(r.rewards == first.rewards for r in rollouts[1:]),
        "p": prompt,
        "r": entries,
    }
    if first.step is not None:  # a training run's group: the page filters by step
        group["s"] = first.step
    if not transcripts:
        group["x"] = True
    return group


def _add_transcript(
    entry: RolloutEntry, record: Trajectory, prompt_length: int, tokens: bool
) -> None:
    """The transcript without the group's shared ``prompt_length`` leading messages, the
    logs and, when calls recorded tokens, ``k``: per shown message index, ``[token count,
    mean logprob]`` of the call that wrote it (plus its ids and logprobs with ``tokens``);
    ``an``: the rollout's annotations, when it has any (judge explanations among them)."""
    messages = record.messages
    entry["m"] = None if messages is None else list(messages[prompt_length:])
    entry["l"] = list(record.logs)
    turns = _turn_tokens(record, prompt_length, tokens)
    if turns:
        entry["k"] = turns
    if record.annotations:
        entry["an"] = dict(record.annotations)


def _turn_tokens(record: Trajectory, prompt_length: int, tokens: bool) -> dict[str, list[object]]:
    turns: dict[str, list[object]] = {}
    for call in record.model_calls:
        ids, logprobs, index = (
            call.completion_token_ids,
            call.completion_logprobs,
            call.message_index,
        )
        if ids is None or index is None or index < prompt_length:
            continue
        mean = round(math.fsum(logprobs) / len(logprobs), 4) if logprobs else None
        turn: list[object] = [len(ids), mean]
        if tokens:
            turn += [list(ids), None if logprobs is None else list(logprobs)]
        turns[str(index - prompt_length)] = turn
    return turns


def _shared_prefix(transcripts: Sequence[Sequence[Mapping[str, Any]]]) -> list[Mapping[str, Any]]:
    """The prompt every transcript starts with: the common leading messages before the
    first assistant message."""
    if not transcripts:
        return []
    prefix: list[Mapping[str, Any]] = []
    for messages in zip(*transcripts, strict=False):
        first = messages[0]
        if not isinstance(first, Mapping) or first.get("role") == "assistant":
            break
        if any(message != first for message in messages[1:]):
            break
        prefix.append(first)
    return prefix


def add_to(tally: ReportTally, entry: GroupEntry) -> None:
    """Count an entry in the run's summary (its scalars and advantages as computed)."""
    rollouts = entry["r"]
    tally.add_outcomes(
        [r["t"] for r in rollouts],
        [r["w"] for r in rollouts],
        [r["u"] for r in rollouts],
        signal=([r["s"] for r in rollouts], [r["v"] for r in rollouts]),
    )
    for r in rollouts:
        tally.add_coverage(TokenCoverage.from_json(r.get("cv")))


def compacted(
    entry: GroupEntry, keys: Sequence[str], reason_index: Mapping[str, int]
) -> dict[str, object]:
    """The entry as the page embeds it: rewards as a list in ``keys`` order, the reason as
    an index into the page's reasons."""
    rollouts = []
    for r in entry["r"]:
        rollout: dict[str, object] = {
            "g": r["g"],
            "id": r["id"],
            "a": r["a"],
            "t": reason_index[r["t"]],
            "w": [r["w"].get(key) for key in keys],
            "tm": r["tm"],
            "u": r["u"],
        }
        for name in _TRANSCRIPT_FIELDS:
            if name in r:
                rollout[name] = r[name]  # type: ignore[literal-required]  # one of the four
        rollout["s"], rollout["v"] = r["s"], r["v"]
        if "cv" in r:
            rollout["cv"] = r["cv"]
        rollouts.append(rollout)
    group: dict[str, object] = {
        "i": entry["i"],
        "id": entry["id"],
        "f": entry["f"],
        "p": entry["p"],
        "r": rollouts,
    }
    for name in ("s", "x"):
        if name in entry:
            group[name] = entry[name]  # type: ignore[literal-required]  # one of the two
    return group


def data_head(
    header: Mapping[str, object],
    source: str | None,
    tally: ReportTally,
    *,
    omitted: Mapping[str, object] | None = None,
) -> dict[str, object]:
    """The page's data without its groups: header, summary, reward keys and reasons (and
    ``omitted``, when groups' transcripts were left out: how many, and the budget)."""
    head: dict[str, object] = {
        "format": DATA_FORMAT,
        "source": source,
        "header": dict(header),
        "summary": _summary(tally),
        "keys": tally.reward_keys,
        "reasons": tally.reasons,
    }
    if omitted is not None:
        head["omitted"] = dict(omitted)
    return head


def _summary(tally: ReportTally) -> dict[str, Any]:
    """The run's summary as ``summarize`` computes it (the numbers of ``.report.json``)."""
    report = tally.report(
        run_id="",
        results_path=None,
        examples=tally.groups,
        groups_resumed=0,
        rollouts_run=0,
        wall_seconds=0.0,
    )
    data = report.to_dict()
    return {
        "scored_reward_stats": data["scored_reward_stats"],
        "failed_share": report.failed_share,
        "scalar_stats": data["scalar_stats"],
        "scored_scalar_stats": data["scored_scalar_stats"],
        "reward_weights": data["reward_weights"],
        "advantage_signal_share": report.advantage_signal_share,
        "mean_abs_advantage": report.mean_abs_advantage,
        "examples": tally.groups,
        "groups": report.groups,
        "rollouts": report.rollouts,
        "rollouts_by_reason": data["rollouts_by_reason"],
        "groups_by_reason": data["groups_by_reason"],
        "reward_stats": data["reward_stats"],
        "no_variance_group_share": report.no_variance_group_share,
        "no_variance_groups": tally.flat_groups,
        "pass_at_k": data["pass_at_k"],
        "usage": _usage_summary(report.usage),
        "coverage": data["coverage"],
    }


def _usage_summary(usage: UsageStats | None) -> dict[str, Any] | None:
    """Token totals, and their mean over the rollouts that recorded usage (``None``:
    none did), from the report's ``UsageStats``."""
    if usage is None:
        return None
    totals = {key: total for key in TOKEN_USAGE_KEYS if (total := getattr(usage, key)) is not None}
    return {
        "rollouts_with_usage": usage.rollouts,
        "totals": totals,
        "mean_per_rollout": {key: total / usage.rollouts for key, total in totals.items()},
    }


def embedded_pieces(head: Mapping[str, object], groups: Iterable[object]) -> Iterator[str]:
    """``embedded_json({**head, "groups": [*groups]})``, piece by piece (the same text)."""
    text = embedded_json(head)
    yield text[:-1] + ',"groups":['  # the head is never empty: "format" comes first
    for number, group in enumerate(groups):
        yield ("," if number else "") + embedded_json(group)
    yield "]}"


# Outside JSON syntax, so in the dumped text they occur only inside string literals.
_BIDI_CONTROLS = re.compile("[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def embedded_json(data: object) -> str:
    """``data`` as JSON safe inside a ``<script>`` element: no ``<`` (so no ``</script>``
    or ``<!--``), no raw U+2028/U+2029 line separators and no lone surrogates (UTF-8 has
    no form for them; they are written as the JSON escape ``\\ud800``). Bidirectional
    formatting characters (``U+202E`` and kin, which would reorder the text around them on
    the page, "Trojan Source") become the visible text ``\\u202e``, as ``show`` prints them."""
    try:
        text = json.dumps(
            data, ensure_ascii=False, separators=(",", ":"), default=str, allow_nan=False
        )
    except ValueError:  # NaN or an infinity somewhere: JSON.parse would refuse the page
        text = json.dumps(_finite(data), ensure_ascii=False, separators=(",", ":"), default=str)
    text = _BIDI_CONTROLS.sub(lambda match: f"\\\\u{ord(match.group()):04x}", text)
    return (
        text.replace("<", "\\u003c")
        .replace(">", "\\u003e")
        .replace("&", "\\u0026")
        .replace("\u2028", "\\u2028")
        .replace("\u2029", "\\u2029")
        .encode("utf-8", "backslashreplace")  # lone surrogates as JSON's own \\udXXX
        .decode("utf-8")
    )


def _finite(value: object) -> object:
    """``value`` with every NaN or infinite float replaced by its text (``"NaN"``,
    ``"Infinity"``, ``"-Infinity"``, as JavaScript writes them)."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, Mapping):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(item) for item in value]
    return value
