"""Commands that read results files: ``view``, ``show``, ``rescore`` and ``compare``."""

from __future__ import annotations

import asyncio
import contextlib
import json
import unicodedata
import webbrowser
from collections.abc import AsyncIterator, Iterator, Mapping
from pathlib import Path
from typing import Any

import click
from rich import box
from rich.console import Console, Group
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from benchmax.auth import ModelAuth, StaticBearerAuth
from benchmax.cli._credentials import (
    MOCK_KEY,
    auth_variables,
    bearer_from_variable,
    injected_auth_names,
)
from benchmax.cli._json_output import echo_json
from benchmax.cli._options import (
    auth_option,
    concurrency_option,
    data_option,
    env_arg_option,
    json_option,
    mock_policy_option,
    output_option,
)
from benchmax.cli._run_command import free_path, load_mock_policy
from benchmax.cli._targets import (
    USER_CODE_ERRORS,
    EnvTarget,
    TargetError,
    described,
    import_file,
    load_class_target,
    load_target,
    parse_env_args,
    substitute_mock,
    uses_mock,
)
from benchmax.envs import BaseEnv
from benchmax.envs.shared_types import FINISHED
from benchmax.runner import (
    Comparison,
    RescoreReport,
    Results,
    RolloutFilter,
    RunError,
    compare_files,
    read_results,
    rescore_results,
    select_from_file,
    write_html_report,
)
from benchmax.trajectory import Trajectory, is_simulated_user

__all__ = [
    "compare_command",
    "render_comparison",
    "rescore_command",
    "show_command",
    "view_command",
]

_KEEP = {"\n", "\t"}


def _read(path: Path) -> Results:
    with _reading(path):
        return read_results(path)


@contextlib.contextmanager
def _reading(path: Path) -> Iterator[None]:
    """Turn the errors of reading results file ``path`` into one-line CLI errors."""
    try:
        yield
    except (OSError, RunError) as error:  # read_results names the file and the reason
        raise click.ClickException(str(error)) from None


def _add_columns(table: Table, label: str, *numbers: str) -> None:
    """A text column ``label`` that folds onto more lines when the terminal is narrow, then
    right-aligned number columns that are never wrapped: on an 80-column terminal the
    label gives way first, so every number stays whole."""
    table.add_column(label, justify="left", overflow="fold", min_width=4)
    for name in numbers:
        table.add_column(name, justify="right", no_wrap=True)


def _print_whole(console: Console, table: Table) -> None:
    """Print ``table`` (made with ``_add_columns``); when its number columns alone need more
    than the terminal's width, it is printed wider (the terminal wraps its lines) rather
    than with a number cut."""
    needed = len(table.columns) + 1  # borders
    for column in table.columns:
        if column.no_wrap:
            lines = [
                line
                for cell in (column.header, *column.cells)
                for line in Text.from_markup(str(cell)).plain.splitlines()
            ]
            needed += max((len(line) for line in lines), default=0) + 2
        else:
            needed += (column.min_width or 1) + 2
    if needed <= console.width:
        console.print(table)
        return
    width = console.width
    console.width = needed
    try:
        console.print(table)
    finally:
        console.width = width


def _size(count: int) -> str:
    size: float = count
    for unit in ("bytes", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{count} {unit}" if unit == "bytes" else f"{size:.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")


# ---- view ---------------------------------------------------------------------------------


@click.command("view")
@click.argument("results", type=click.Path(path_type=Path))
@output_option("the HTML report (default: RESULTS with suffix .html)")
@click.option("--open", "open_page", is_flag=True, help="Open the report in a web browser.")
@click.option(
    "--tokens",
    is_flag=True,
    help="Embed the recorded token ids and logprobs, shown per assistant turn "
    "(every turn shows its token count and mean logprob without it).",
)
def view_command(results: Path, output: Path | None, open_page: bool, tokens: bool) -> None:
    """Write a self-contained HTML report of RESULTS (no server, works offline).

    RESULTS may be a benchmax train output directory: its training page (reward curves,
    termination reasons, lengths, evals and base vs final per step, then every step's
    groups; default OUTPUT/training.html).

    The page shows the run, its summary and reward charts, a sortable and filterable table
    of examples, and every group's transcripts side by side. A file still being written
    shows its complete groups. The file is read as a stream; the page embeds the
    transcripts of the groups read first, up to 64 MB, and names the show command that
    prints any later group's.
    """
    from benchmax.training._page import is_training_run, write_training_page

    training = is_training_run(results)
    with _reading(results):
        try:
            if training:
                report = write_training_page(results, output, tokens=tokens)
            else:
                report = write_html_report(results, output, tokens=tokens)
        except OSError as error:  # reading errors are ResultsFileError: this is the page
            default = results / "training.html" if training else results.with_suffix(".html")
            page = output if output is not None else default
            raise click.ClickException(f"cannot write {page}: {error.strerror or error}") from None
    click.echo(
        f"wrote {report.path} ({_size(report.size_bytes)}, {report.groups} groups, "
        f"{report.rollouts} rollouts) in {report.build_seconds:.2f} s"
    )
    if report.omitted_groups:
        import shlex

        click.echo(
            f"transcripts of {report.omitted_groups} groups read after the page's transcript "
            f"budget are not in it (benchmax show {shlex.quote(str(results))} --example ID "
            "prints one)"
        )
    if open_page:
        webbrowser.open(report.path.resolve().as_uri())


# ---- show ---------------------------------------------------------------------------------


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


def _plain(value: Any, limit: int | None) -> Text:
    text = value if isinstance(value, str) else json.dumps(value, indent=2)
    return Text(_shown(text, limit))


_ROLE_STYLES = {
    "system": "bold bright_black",
    "developer": "bold bright_black",
    "user": "bold blue",
    "assistant": "bold magenta",
    "tool": "bold yellow",
}


def _message(message: Any, limit: int | None) -> Group:
    if not isinstance(message, Mapping):
        return Group(_plain(message, limit))
    role = str(message.get("role", "?"))
    label = Text(role, style=_ROLE_STYLES.get(role, "bold"))
    if is_simulated_user(message):
        label.append(" (simulated)", style="dim")
    if message.get("tool_call_id"):
        label.append(f" {visible(str(message['tool_call_id']))}", style="dim")
    parts: list[Any] = [label]
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


def _arguments(arguments: Any, limit: int | None) -> str:
    """Tool-call arguments: compact JSON on one line when short, else indented."""
    try:
        value = json.loads(arguments) if isinstance(arguments, str) else arguments
        compact = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        return " " + _shown(str(arguments), limit)
    if len(compact) <= 100:
        return " " + visible(compact)
    return "\n" + _shown(json.dumps(value, ensure_ascii=False, indent=2), limit)


def _annotation(key: str, value: Any, limit: int | None) -> list[Text]:
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
    body: list[Any] = [Text(f"rewards: {visible(rewards) or '(none)'}", style="bold")]
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
        with _reading(results):
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


# ---- rescore ------------------------------------------------------------------------------


def _header_target(env_definition: Mapping[str, Any], data_dir: Path) -> EnvTarget:
    """The environment class the results header names.

    A ``module:Class`` that does not import from here is looked for as a file under the data
    directory, its parents and the working directory (``module/path.py``).
    """
    if not isinstance(env_definition, Mapping):
        raise TargetError(
            "the results header's definition.env is not an object; pass TARGET "
            "(path/to/env.py:Class) to name the environment"
        )
    if "class" not in env_definition:
        raise TargetError(
            "the run used a bundle: pass the bundle file (or file.py:Class) as TARGET"
        )
    spec = env_definition["class"]
    module_name, _, class_name = spec.rpartition(":") if isinstance(spec, str) else ("", "", "")
    if not (module_name and class_name and all(module_name.split("."))):
        raise TargetError(
            f"the results header's definition.env.class ({spec!r}) is not module:Class; "
            "pass TARGET (path/to/env.py:Class) to name the environment"
        )
    try:
        return load_class_target(spec)
    except TargetError as error:
        module, _, qualname = spec.rpartition(":")
        relative = Path(*module.split("."))
        roots = [data_dir.resolve(), *data_dir.resolve().parents[:3], Path.cwd()]
        for root in roots:
            for candidate in (root / relative.with_suffix(".py"), root / relative / "__init__.py"):
                if candidate.is_file():
                    import_file(candidate)
                    return load_class_target(f"{module}:{qualname}")
        raise TargetError(
            f"{error}; pass TARGET (path/to/env.py:Class) to name the environment"
        ) from None


def _data_directory(given: Path | None, header: Mapping[str, Any], results: Path) -> Path:
    """``--data`` when given, else the data directory the results header records (``.``
    for files written before headers recorded it)."""
    if given is not None:
        return given
    recorded = header.get("data_dir")
    if not isinstance(recorded, str) or not recorded:
        return Path(".")
    if not Path(recorded).is_dir():
        raise TargetError(
            f"the run's data directory {recorded} (recorded in {results}) is not there; "
            "pass --data DIR"
        )
    return Path(recorded)


def _recorded_policy(spec: object, results: Path, data_dir: Path) -> str:
    """The run's mock policy (default ``echo``). A ``file.py:function`` recorded relative
    to the directory the run started in, and not found from here, is looked for beside the
    results file and up to three directories above it, then under the data directory."""
    if not isinstance(spec, str) or not spec:
        return "echo"
    module_part, _, name = spec.rpartition(":")
    relative = Path(module_part)
    if not module_part.endswith(".py") or relative.is_absolute() or relative.is_file():
        return spec
    folder = results.parent.absolute()
    for root in (folder, *folder.parents[:3], data_dir.absolute()):
        if (root / relative).is_file():
            return f"{root / relative}:{name}"
    return spec


@contextlib.asynccontextmanager
async def embedded_mock_url(needed: bool, policy_spec: str) -> AsyncIterator[str | None]:
    """The base URL of an embedded mock model answering with ``policy_spec`` while the
    block runs, when ``needed`` (``'@mock'`` constructor arguments), else ``None``.
    Raises ``TargetError`` when the policy cannot be loaded."""
    if not needed:
        yield None
        return
    from benchmax.testing import MockModelServer

    try:
        policy = load_mock_policy(policy_spec)
    except TargetError as error:
        raise TargetError(
            f"{error} (the mock policy that '@mock' arguments need; pass --mock-policy)"
        ) from None
    async with MockModelServer(policy, record=False) as server:
        yield server.base_url


def _with_overrides(source: Mapping[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """The run's environment definition with ``--env-arg`` overrides applied."""
    definition = dict(source)
    if overrides:
        definition["constructor_args"] = {**(source.get("constructor_args") or {}), **overrides}
    return definition


def target_definition(target: EnvTarget, env_args: Mapping[str, Any]) -> dict[str, Any]:
    """How a new header names a TARGET given on the command line."""
    if target.bundle_digest is not None:
        return {"bundle_digest": target.bundle_digest, "constructor_args": dict(env_args)}
    cls = target.env_class
    return {"class": f"{cls.__module__}:{cls.__qualname__}", "constructor_args": dict(env_args)}


@contextlib.asynccontextmanager
async def scoring_env(
    target: EnvTarget,
    env_args: Mapping[str, Any],
    providers: Mapping[str, ModelAuth],
    *,
    mock_policy: str,
    needs: str,
) -> AsyncIterator[tuple[BaseEnv, dict[str, ModelAuth]]]:
    """``target``'s environment, constructed to score stored transcripts (``rescore``,
    ``traces --baseline``), with the credentials to bind; closed after the block.

    ``'@mock'`` constructor arguments point at an embedded mock answering with
    ``mock_policy``, and then every injected name (``providers``' included) gets the
    mock's key; otherwise an injected name without a provider is noted on stderr.
    Raises ``TargetError`` when it cannot be constructed or is not a ``BaseEnv``
    (``needs`` says why it must be one).
    """
    mock = uses_mock(env_args)
    async with embedded_mock_url(mock, mock_policy) as url:
        args = substitute_mock(env_args, url) if url is not None else dict(env_args)
        try:
            env = target.env_class(**args)
        except USER_CODE_ERRORS as error:
            raise TargetError(f"cannot construct {target.label}: {described(error)}") from error
        try:
            if not isinstance(env, BaseEnv):
                raise TargetError(f"{target.label} is not a BaseEnv: {needs}")
            credentials = dict(providers)
            injected = injected_auth_names(env)
            if mock:
                for name in injected | set(providers):
                    credentials[name] = StaticBearerAuth(MOCK_KEY)
            elif missing := sorted(injected - set(providers)):
                Console(stderr=True).print(
                    f"[yellow]note:[/] no --auth given for injected credential(s) "
                    f"{escape(', '.join(missing))}; calls using them will fail",
                    soft_wrap=True,
                )
            yield env, credentials
        finally:
            await env.aclose()


async def _rescore(
    source: Path,
    output: Path,
    target: EnvTarget,
    env_args: dict[str, Any],
    definition: dict[str, Any],
    *,
    data_dir: Path,
    providers: Mapping[str, ModelAuth],
    mock_policy: str,
    allow_missing: bool,
    concurrency: int,
) -> RescoreReport:
    async with scoring_env(
        target, env_args, providers, mock_policy=mock_policy, needs="rescoring needs transcripts"
    ) as (env, credentials):
        return await rescore_results(
            env,
            source,
            output,
            base_dir=data_dir,
            env_definition=definition,
            auth_providers=credentials,
            allow_missing=allow_missing,
            max_concurrent_groups=concurrency,
        )


def _render_rescore(report: RescoreReport, console: Console) -> None:
    table = Table(title="rewards: before → after rescoring", title_justify="left")
    _add_columns(table, "key", "old mean", "new mean", "change", "old std", "new std")
    for key in dict.fromkeys([*report.old_stats, *report.new_stats]):
        old, new = report.old_stats.get(key), report.new_stats.get(key)
        table.add_row(
            escape(key),
            f"{old.mean:.3f}" if old else "-",
            f"{new.mean:.3f}" if new else "-",
            f"{new.mean - old.mean:+.3f}" if old and new else "-",
            f"{old.std:.3f}" if old else "-",
            f"{new.std:.3f}" if new else "-",
        )
    _print_whole(console, table)
    reasons = Table(title="termination reasons", title_justify="left")
    _add_columns(reasons, "reason", "before", "after")
    for reason in dict.fromkeys([*report.old_reasons, *report.new_reasons]):
        reasons.add_row(
            escape(reason),
            str(report.old_reasons.get(reason, 0)),
            str(report.new_reasons.get(reason, 0)),
        )
    _print_whole(console, reasons)
    console.print(
        f"rescored {report.rescored} rollouts, kept {report.kept} that did not reach scoring; "
        f"{report.changed} of {report.rollouts} changed"
    )
    if report.missing_examples:
        console.print(
            f"[yellow]left out {len(report.missing_examples)} example(s) not in the dataset[/]"
        )
    console.print(f"results: {escape(str(report.output))}", soft_wrap=True)


@click.command("rescore")
@click.argument("results", type=click.Path(path_type=Path))
@click.argument("target", required=False)
@data_option(
    "Data directory the run used (the examples' payloads are read from it; default: the "
    "one the results header records, else .).",
    default=None,
)
@output_option("the new results file (default: RESULTS-stem.rescored.jsonl beside RESULTS)")
@env_arg_option("Override a constructor argument of the run (value parsed as JSON). Repeatable.")
@auth_option("Bind InjectedAuth(NAME) (e.g. a judge) to the bearer key in variable VAR.")
@mock_policy_option()
@click.option(
    "--allow-missing",
    is_flag=True,
    help="Leave out examples the dataset no longer has instead of stopping.",
)
@click.option("--force", is_flag=True, help="Replace the -o file when it exists.")
@concurrency_option(8)
def rescore_command(
    results: Path,
    target: str | None,
    data_dir: Path | None,
    output: Path | None,
    env_arg_pairs: tuple[str, ...],
    auth_pairs: tuple[str, ...],
    mock_policy: str | None,
    allow_missing: bool,
    force: bool,
    concurrency: int,
) -> None:
    """Score the stored transcripts of RESULTS again, without calling the model.

    TARGET (file.py:Class, package.module:Class or a bundle) is the environment whose
    reward hooks score; by default the class named in the results header, with the run's
    constructor arguments. Judges are called as in a run. Without --mock-policy, '@mock'
    arguments point to the run's recorded mock policy (else echo).
    """
    loaded = _read(results)
    definition = loaded.definition
    source_env: Mapping[str, Any] = definition.get("env") or {}
    try:
        if output is not None and output.exists() and not force:
            raise TargetError(f"{output} exists; pass --force to replace it, or another -o")
        data_dir = _data_directory(data_dir, loaded.header, results)
        if not data_dir.is_dir():
            raise TargetError(f"data directory not found: {data_dir}")
        overrides = parse_env_args(env_arg_pairs)
        providers: dict[str, ModelAuth] = {
            name: bearer_from_variable(variable, f"--auth {name}")
            for name, variable in auth_variables(auth_pairs).items()
        }
        env_target = load_target(target) if target else _header_target(source_env, data_dir)
        recorded_args = (
            source_env.get("constructor_args") if isinstance(source_env, Mapping) else None
        )
        env_args = {
            **env_target.constructor_args,
            **(recorded_args if isinstance(recorded_args, Mapping) else {}),
            **overrides,
        }
    except TargetError as error:
        raise click.ClickException(str(error)) from None
    policy = mock_policy or _recorded_policy(definition.get("mock_policy"), results, data_dir)
    output = output or free_path(results.parent, f"{results.stem}.rescored", ".jsonl")
    console = Console()
    try:
        report = asyncio.run(
            _rescore(
                results,
                output,
                env_target,
                env_args,
                target_definition(env_target, env_args)
                if target
                else _with_overrides(source_env, overrides),
                data_dir=data_dir,
                providers=providers,
                mock_policy=policy,
                allow_missing=allow_missing,
                concurrency=concurrency,
            )
        )
    except (TargetError, RunError, OSError) as error:
        raise click.ClickException(str(error)) from None
    _render_rescore(report, console)


# ---- compare ------------------------------------------------------------------------------


@click.command("compare")
@click.argument("a", type=click.Path(path_type=Path))
@click.argument("b", type=click.Path(path_type=Path))
@click.option("--key", metavar="KEY", help="Reward key for the changed-most list.")
@click.option(
    "--top",
    type=click.IntRange(min=0),
    default=10,
    show_default=True,
    metavar="N",
    help="List the N examples that changed most.",
)
@click.option("--seed", type=int, default=0, show_default=True, help="Bootstrap random seed.")
@click.option(
    "--resamples",
    type=click.IntRange(min=1),
    default=2000,
    show_default=True,
    metavar="R",
    help="Bootstrap resamples.",
)
@json_option()
def compare_command(
    a: Path, b: Path, key: str | None, top: int, seed: int, resamples: int, as_json: bool
) -> None:
    """Compare run B with run A on the examples both ran (matched by example id).

    Per reward key: the means, the paired difference B - A with a percentile-bootstrap 95%
    interval over examples, the share of examples that got better, worse or stayed equal,
    and pass@k of binary keys.
    """
    try:
        with _reading(a), _reading(b):
            comparison = compare_files(a, b, key=key, top=top, resamples=resamples, seed=seed)
    except ValueError as error:
        raise click.ClickException(f"cannot compare {a} and {b}: {error}") from None
    if as_json:
        echo_json({"a": str(a), "b": str(b), **comparison.to_json()})
        return
    render_comparison(comparison, a, b, Console(), top=top)


def render_comparison(
    comparison: Comparison, a: Path, b: Path, console: Console, *, top: int = 10
) -> None:
    """Print ``comparison`` (run B against run A) as ``benchmax compare`` does: the per-key
    table with paired intervals, pass@k of binary keys and the examples that changed most."""
    console.print(
        f"matched {comparison.matched} examples by id"
        + (f"; {comparison.only_in_a} only in A" if comparison.only_in_a else "")
        + (f"; {comparison.only_in_b} only in B" if comparison.only_in_b else ""),
        soft_wrap=True,
    )
    console.print(f"A: {escape(str(a))}\nB: {escape(str(b))}", soft_wrap=True)
    table = Table(
        title="B - A per reward key (example means)", title_justify="left", box=box.SIMPLE_HEAD
    )
    _add_columns(table, "key", "A", "B", "B - A", "95% CI", "better/\nworse/equal")
    for item in comparison.keys:
        low, high = item.interval
        table.add_row(
            escape(item.key),
            f"{item.mean_a:.3f}",
            f"{item.mean_b:.3f}",
            f"{item.difference:+.3f}",
            f"[{low:+.3f}, {high:+.3f}]",
            f"{item.better:.0%}/{item.worse:.0%}/{item.equal:.0%}",
        )
    _print_whole(console, table)
    binary = [item for item in comparison.keys if item.pass_a and item.pass_b]
    if binary:
        passes = Table(title="pass@k (binary keys)", title_justify="left", box=box.SIMPLE_HEAD)
        _add_columns(passes, "key", "k", "pass@1 A", "pass@1 B", "pass@k A", "pass@k B")
        for item in binary:
            assert item.pass_a is not None and item.pass_b is not None
            passes.add_row(
                escape(item.key),
                f"{item.pass_a.k}/{item.pass_b.k}"
                if item.pass_a.k != item.pass_b.k
                else str(item.pass_a.k),
                f"{item.pass_a.pass_at_1:.3f}",
                f"{item.pass_b.pass_at_1:.3f}",
                f"{item.pass_a.pass_at_k:.3f}",
                f"{item.pass_b.pass_at_k:.3f}",
            )
        _print_whole(console, passes)
    for name, keys in (("A", comparison.keys_only_in_a), ("B", comparison.keys_only_in_b)):
        if keys:
            console.print(f"reward keys only in {name}: {escape(', '.join(keys))}")
    if comparison.changed_most:
        changes = Table(
            title=f"examples that changed most ({escape(comparison.changed_most[0].key)})",
            title_justify="left",
        )
        _add_columns(changes, "example id", "A", "B", "B - A")
        for change in comparison.changed_most:
            changes.add_row(
                escape(change.example_id),
                f"{change.mean_a:.3f}",
                f"{change.mean_b:.3f}",
                f"{change.difference:+.3f}",
            )
        _print_whole(console, changes)
    elif top:
        console.print("no example changed")
