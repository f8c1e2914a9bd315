"""The ``show`` command: selected rollouts of a results file, printed in the terminal with
control characters spelled out."""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Mapping
from pathlib import Path

import click
from rich.console import Console, Group
from rich.markup import escape
from rich.panel import Panel
from rich.text import Text

from benchmax.cli._json_output import echo_json
from benchmax.cli._options import json_option
from benchmax.cli._results_reading import reading
from benchmax.envs.shared_types import FINISHED
from benchmax.results import RolloutFilter, select_from_file
from benchmax.trajectory import Trajectory, is_simulated_user

__all__ = ["show_command", "visible"]

_KEEP = {"\n", "\t"}


def visible(text: str) -> str:
    """``text`` with control and format characters (ANSI escapes, bidi overrides, zero-width
    characters, line separators other than ``\\n``, lone surrogates) spelled out as
    ``\\xNN``/``\\uNNNN``."""
    out = []
    for char in text:
        if char not in _KEEP and unicodedata.category(char) in ("Cc", "Cf", "Cs", "Zl", "Zp"):
            code = ord(char)
            out.append(f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")
        else:
            out.append(char)
    return "".join(out)


COUNTED_BYTES = 64 * 2**20
"""Results files up to this size are read whole by ``show`` to count the matching
rollouts; a larger one is read only until one more rollout than ``--limit`` matches."""

SHOWN_CHARACTERS = 100_000
"""The characters ``show`` prints of one text (a message, its reasoning, tool-call
arguments, a log message) unless ``--full``: the limit ``view``'s page clips at."""


def _shown(text: str, limit: int | None) -> str:
    """``text`` made ``visible``, clipped to ``limit`` characters with a marker saying how
    many more there are (``None``: whole)."""
    if limit is None or len(text) <= limit:
        return visible(text)
    more = len(text) - limit
    return f"{visible(text[:limit])}\n… [{more:,} more characters; --full shows everything]"


def _plain(value: object, limit: int | None) -> Text:
    text = value if isinstance(value, str) else json.dumps(value, indent=2)
    return Text(_shown(text, limit))


_ROLE_STYLES = {
    "system": "bold bright_black",
    "developer": "bold bright_black",
    "user": "bold blue",
    "assistant": "bold magenta",
    "tool": "bold yellow",
}


def _message(message: object, limit: int | None) -> Group:
    if not isinstance(message, Mapping):
        return Group(_plain(message, limit))
    role = str(message.get("role", "?"))
    label = Text(role, style=_ROLE_STYLES.get(role, "bold"))
    if is_simulated_user(message):
        label.append(" (simulated)", style="dim")
    if message.get("tool_call_id"):
        label.append(f" {visible(str(message['tool_call_id']))}", style="dim")
    parts: list[Text | Group] = [label]
    for field in ("reasoning_content", "reasoning"):
        if isinstance(message.get(field), str) and message[field]:
            parts.append(Text(f"[reasoning] {_shown(message[field], limit)}", style="dim italic"))
    content = message.get("content")
    if isinstance(content, str):
        parts.append(Text(_shown(content, limit)))
    elif isinstance(content, list):
        for part in content:
            if isinstance(part, Mapping) and part.get("type") == "text":
                parts.append(Text(_shown(str(part.get("text", "")), limit)))
            elif isinstance(part, Mapping) and part.get("type") == "image_url":
                url = (part.get("image_url") or {}).get("url", "")
                shown = url if not str(url).startswith("data:") else f"{str(url)[:30]}..."
                parts.append(Text(f"[image: {visible(str(shown))}]", style="italic"))
            else:
                parts.append(_plain(part, limit))
    elif content is not None:
        parts.append(_plain(content, limit))
    for call in message.get("tool_calls") or []:
        function = call.get("function", {}) if isinstance(call, Mapping) else {}
        parts.append(
            Text.assemble(
                (f"-> {visible(str(function.get('name', '?')))}", "yellow"),
                _arguments(function.get("arguments"), limit),
            )
        )
    return Group(*parts)


def _arguments(arguments: object, limit: int | None) -> str:
    """Tool-call arguments: compact JSON on one line when short, else indented."""
    try:
        value = json.loads(arguments) if isinstance(arguments, str) else arguments
        compact = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        return " " + _shown(str(arguments), limit)
    if len(compact) <= 100:
        return " " + visible(compact)
    return "\n" + _shown(json.dumps(value, ensure_ascii=False, indent=2), limit)


def _annotation(key: str, value: object, limit: int | None) -> list[Text]:
    """One annotation: a judge's explanations (``{reward_key: {"title", "score", "reward",
    "reasoning", "remarks"}}``, from ``score_rubrics(explain=...)``) one line per rubric,
    anything else as JSON."""
    lines = [Text(f"annotation {visible(key)}", style="bold")]
    entries = value.items() if isinstance(value, Mapping) else ()
    if entries and all(isinstance(v, Mapping) and "reward" in v for _, v in entries):
        for reward_key, verdict in entries:
            facts = [
                f"{name} {verdict[name]:g}"
                for name in ("score", "reward")
                if isinstance(verdict.get(name), int | float)
            ]
            if isinstance(verdict.get("skipped"), str):
                facts.append(verdict["skipped"])
            lines.append(
                Text.assemble(
                    (visible(str(verdict.get("title", reward_key))), "bold"),
                    (f" {visible(str(reward_key))} · {' · '.join(facts)}", "dim"),
                )
            )
            for field in ("reasoning", "remarks"):
                if isinstance(verdict.get(field), str):
                    lines.append(Text(f"  {field}: {_shown(verdict[field], limit)}"))
        return lines
    lines.append(_plain(value, limit))
    return lines


def _rollout_panel(record: Trajectory, limit: int | None) -> Panel:
    rewards = ", ".join(f"{k}={v:g}" for k, v in record.rewards.items())
    reason = record.termination_reason
    style = "green" if reason == FINISHED else "yellow"
    title = Text.assemble(
        (f"example {record.example_index} ", "bold"),
        (visible(record.example_id)[:16], "dim"),
        f" · rollout {record.group_index} · ",
        (visible(reason), style),
    )
    # The rewards open the body, not the title: a title is cut to one line, a body line
    # wraps between rewards, so every number stays whole on a narrow terminal.
    body: list[Text | Group] = [Text(f"rewards: {visible(rewards) or '(none)'}", style="bold")]
    timings = record.timings
    facts = " · ".join(f"{k.removesuffix('_seconds')} {v:.3f} s" for k, v in timings.items())
    usage = record.usage
    if usage:
        facts += " · tokens " + ", ".join(f"{k} {v}" for k, v in usage.items())
    body.append(Text(f"{record.rollout_id} · {facts}", style="dim"))
    transcript = record.messages
    if transcript is None:
        body.append(Text("no transcript recorded (not a BaseEnv rollout)", style="dim"))
    else:
        for message in transcript:
            body.append(Text(""))
            body.append(_message(message, limit))
    for key, value in record.annotations.items():
        body.append(Text(""))
        body.extend(_annotation(key, value, limit))
    logs = record.logs
    if logs:
        body.append(Text(""))
        body.append(Text(f"logs ({len(logs)})", style="bold"))
        for entry in logs:
            level = str(entry.get("level", ""))
            body.append(
                Text.assemble(
                    (level, "red" if level in ("ERROR", "CRITICAL") else "yellow"),
                    f" {visible(str(entry.get('logger', '')))}: ",
                    _shown(str(entry.get("message", "")), limit),
                )
            )
            if entry.get("exception"):
                body.append(Text(_shown(str(entry["exception"]), limit), style="dim"))
    return Panel(Group(*body), title=title, title_align="left", border_style=style)


@click.command("show")
@click.argument("results", type=click.Path(path_type=Path))
@click.option("--reason", metavar="REASON", help="Only rollouts with this termination reason.")
@click.option("--example", "example_id", metavar="ID", help="Only this example (id or prefix).")
@click.option("--min-reward", type=float, metavar="X", help="Only rollouts with KEY >= X.")
@click.option("--max-reward", type=float, metavar="Y", help="Only rollouts with KEY <= Y.")
@click.option("--key", metavar="KEY", help="Reward key the bounds apply to (default: the first).")
@click.option(
    "--limit",
    type=click.IntRange(min=1),
    default=5,
    show_default=True,
    metavar="N",
    help="Show at most N rollouts.",
)
@click.option(
    "--full",
    is_flag=True,
    help=f"Print every character of long texts (by default each message, tool-call "
    f"arguments and log message stops after {SHOWN_CHARACTERS:,} characters, as in view).",
)
@json_option()
def show_command(
    results: Path,
    reason: str | None,
    example_id: str | None,
    min_reward: float | None,
    max_reward: float | None,
    key: str | None,
    limit: int,
    full: bool,
    as_json: bool,
) -> None:
    """Print the transcripts of selected rollouts of RESULTS in the terminal.

    Control characters in model and tool text are shown escaped (\\x1b), never interpreted.
    A text longer than 100,000 characters is clipped with a marker saying how much more
    there is; --full prints it whole.
    """
    try:
        selection = RolloutFilter(
            reason=reason,
            example_id=example_id,
            key=key,
            min_reward=min_reward,
            max_reward=max_reward,
        )
    except ValueError as error:  # the filter options contradict each other or are not numbers
        message = str(error).replace("min_reward", "--min-reward")
        raise click.UsageError(message.replace("max_reward", "--max-reward")) from None
    try:
        with reading(results):
            count_all = not results.is_file() or results.stat().st_size <= COUNTED_BYTES
            found = select_from_file(results, selection, limit=limit, count_all=count_all)
    except ValueError as error:
        raise click.ClickException(str(error)) from None
    if as_json:
        echo_json(
            {
                "results": str(results),
                "rollouts": found.rollouts,
                "matching": found.matching if found.complete else None,
                "reasons": list(found.reasons),
                "shown": [record.to_json() for record in found.shown],
            }
        )
        return
    console = Console()
    if not found.matching:
        hint = (
            "; an --example prefix needs at least 4 characters"
            if example_id is not None and len(example_id) < 4
            else ""
        )
        console.print(
            f"no rollout matches (the file has {found.rollouts} rollouts; "
            f"reasons: {escape(', '.join(found.reasons) or 'none')}){hint}",
            soft_wrap=True,
        )
        return
    for record in found.shown:
        console.print(_rollout_panel(record, None if full else SHOWN_CHARACTERS))
    if not found.complete:
        console.print(
            f"showed the first {len(found.shown)} matching rollouts; more match "
            f"(the file is over {COUNTED_BYTES // 2**20} MB, so show stopped reading "
            "instead of counting them; --limit to see more)",
            style="dim",
        )
        return
    console.print(
        f"showed {len(found.shown)} of {found.matching} matching rollouts"
        + (" (--limit to see more)" if found.matching > limit else ""),
        style="dim",
    )
