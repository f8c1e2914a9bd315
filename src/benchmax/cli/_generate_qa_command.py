"""``benchmax generate-qa``: question/answer datasets from a corpus, by a model or the mock."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from benchmax.auth import ModelAuth, StaticBearerAuth
from benchmax.cli._credentials import MOCK_KEY, bearer_or_no_auth
from benchmax.cli._exit_codes import ChecksFailed
from benchmax.cli._json_output import echo_json
from benchmax.cli._mock_policy import MOCK_MODEL, load_mock_policy
from benchmax.cli._options import (
    FiniteRange,
    api_key_env_option,
    base_url_option,
    concurrency_option,
    eval_fraction_option,
    json_option,
    mock_policy_option,
    model_option,
    output_option,
    seed_option,
)
from benchmax.cli._targets import TargetError

__all__ = ["generate_qa_command"]

_SHOWN_SKIPPED = 5
"""Skipped corpus records named on the terminal (all are in the summary)."""


@contextlib.asynccontextmanager
async def _endpoint(base_url: str | None, policy: Any) -> AsyncIterator[str]:
    if base_url is not None:
        yield base_url
        return
    from benchmax.testing import MockModelServer

    async with MockModelServer(policy, record=False) as server:
        yield server.base_url


def _summary_table(summary: Any) -> Table:
    from benchmax.cli._data_workflow import summary_table

    rows = [
        ("documents", summary.documents),
        ("  links out of the corpus, skipped", summary.links_skipped),
        *([("  JSONL records without text, skipped", len(summary.records_skipped))]
          if summary.records_skipped else []),
        ("chunks", summary.chunks),
        ("requests (chunk and question type)", summary.tasks),
        ("  from an earlier run", summary.tasks_cached),
        ("  retried after a bad reply", summary.tasks_retried),
        ("  skipped (bad reply twice)", summary.tasks_skipped),
        ("  failed (request error)", summary.tasks_failed),
        ("pairs generated", summary.pairs_generated),
        ("  rejected, asked again with the reason", summary.pairs_regenerated),
        *((f"  dropped: {reason}", n) for reason, n in summary.dropped.items()),
        ("pairs kept", summary.pairs_kept),
        *((f"  style {style}", n) for style, n in summary.styles.items()),
        *([("  style rewrite failed, kept natural", summary.style_fallbacks)]
          if summary.style_fallbacks else []),
        *([("  with noise", summary.noisy_rows)] if summary.noisy_rows else []),
        (f"train rows ({summary.train_documents} documents)", summary.train_rows),
        (f"eval rows ({summary.eval_documents} documents)", summary.eval_rows),
    ]  # fmt: skip
    return summary_table("generate-qa summary", rows)


def _types_table(summary: Any) -> Table:
    table = Table(title="question types", title_justify="left")
    table.add_column("type")
    table.add_column("target", justify="right")
    table.add_column("achieved", justify="right")
    table.add_column("rows", justify="right")
    achieved = summary.achieved()
    for name, target in summary.type_targets.items():
        table.add_row(
            escape(name), f"{target:.0%}", f"{achieved[name]:.0%}", str(summary.types.get(name, 0))
        )
    return table


def _weights(
    what: str, known: tuple[str, ...]
) -> Any:  # a click callback: "a=0.5,b=0.5" -> normalized weights
    def parse(_context: click.Context, _parameter: click.Parameter, value: str) -> Any:
        from benchmax.datagen import parse_weights

        try:
            return parse_weights(value, known, what)
        except ValueError as error:
            raise click.BadParameter(str(error)) from None

    return parse


@click.command("generate-qa")
@click.argument("corpus", type=click.Path(path_type=Path))
@output_option(
    "train.jsonl, eval.jsonl and the resume checkpoint to this directory",
    directory=True,
    required=True,
    name="output_dir",
)
@model_option()
@base_url_option()
@api_key_env_option()
@mock_policy_option()
@click.option(
    "--text-field",
    default="text",
    show_default=True,
    help="Field of each .jsonl record holding the document text.",
)
@click.option(
    "--pairs-per-chunk",
    type=click.IntRange(1, 50),
    default=3,
    show_default=True,
    help="Question/answer pairs asked per chunk.",
)
@click.option(
    "--types",
    "type_weights",
    default="lookup=1",
    show_default=True,
    metavar="TYPE=WEIGHT,...",
    callback=_weights("question types", ("lookup", "multi_hop", "reasoning")),
    help="Target mix of question types: lookup, multi_hop (a chunk and its BM25-related "
    "chunk), reasoning; e.g. lookup=0.5,multi_hop=0.3,reasoning=0.2.",
)
@click.option(
    "--styles",
    default="natural",
    show_default=True,
    metavar="STYLE,...",
    help="Question styles, spread equally: natural, keyword (a search query), expert "
    "(the field's jargon); the model rewrites each question into its style.",
)
@click.option(
    "--noise",
    type=FiniteRange(0, 1),
    default=0.0,
    is_flag=False,
    flag_value=0.3,
    show_default=True,
    metavar="[SHARE]",
    help="Share of questions given a typo and an abbreviation (seeded), as --noise=SHARE; "
    "--noise alone: 0.3.",
)
@click.option(
    "--grounding-check/--no-grounding-check",
    default=True,
    show_default=True,
    help="Ask the model whether each answer is supported by the cited chunks.",
)
@click.option(
    "--trivial-overlap",
    type=FiniteRange(0, 1, min_open=True),
    default=0.75,
    show_default=True,
    help="A question sharing a run of words this long (share of a sentence) with one "
    "sentence of its chunk is trivially retrievable and rejected.",
)
@click.option(
    "--regenerate/--no-regenerate",
    default=True,
    show_default=True,
    help="Ask once more for rejected pairs, giving the reasons, before dropping them.",
)
@click.option(
    "--chunk-size",
    type=click.IntRange(min=100),
    default=1500,
    show_default=True,
    help="Maximum characters per chunk.",
)
@click.option(
    "--chunk-overlap",
    type=click.IntRange(min=0),
    default=200,
    show_default=True,
    help="Characters of a chunk's end repeated at the start of the next.",
)
@click.option(
    "--max-answer-words",
    type=click.IntRange(min=1),
    default=8,
    show_default=True,
    help="Longer answers are dropped (short answers grade reliably).",
)
@eval_fraction_option("Share of rows for eval.jsonl (whole documents).")
@seed_option()
@concurrency_option(4)
@click.option(
    "--timeout",
    type=FiniteRange(min=0, min_open=True),
    default=120.0,
    show_default=True,
    help="Seconds for one model request.",
)
@click.option(
    "--follow-links-out",
    is_flag=True,
    help="Also read symbolic links that lead out of CORPUS (skipped and counted by default).",
)
@json_option()
def generate_qa_command(
    corpus: Path,
    output_dir: Path,
    model: str | None,
    base_url: str | None,
    api_key_env: str | None,
    mock_policy: str | None,
    text_field: str,
    pairs_per_chunk: int,
    type_weights: dict[str, float],
    styles: str,
    noise: float,
    grounding_check: bool,
    trivial_overlap: float,
    regenerate: bool,
    chunk_size: int,
    chunk_overlap: int,
    max_answer_words: int,
    eval_fraction: float,
    seed: int,
    concurrency: int,
    timeout: float,
    follow_links_out: bool,
    as_json: bool,
) -> None:
    """Write train.jsonl and eval.jsonl of questions about CORPUS (a file or directory of
    .txt, .md and .jsonl documents) to the output directory.

    Re-running with the same output directory reuses every chunk already answered. Exit
    status 1 when model requests failed or no pair was kept.
    """
    from benchmax._secret_masking import credential_secrets, mask_secrets
    from benchmax.cli._data_workflow import (
        StageProgress,
        print_skipped,
        run_workflow,
        wrote_splits,
    )
    from benchmax.datagen import ChunkingConfig, CorpusError, GenerationConfig, generate_qa
    from benchmax.rewards import Judge

    console = Console(stderr=True)
    try:
        if base_url is not None:
            if model is None:
                raise click.UsageError("--model is required with --base-url")
            if mock_policy is not None:
                raise click.UsageError("--mock-policy needs the embedded mock (omit --base-url)")
            auth: ModelAuth = bearer_or_no_auth(api_key_env, "--api-key-env")
            policy = None
        else:
            if mock_policy is None:
                raise click.UsageError(
                    "without --base-url the embedded mock model answers: give it a question "
                    "writer with --mock-policy (e.g. examples/corpus/policy.py:reply)"
                )
            policy = load_mock_policy(mock_policy)
            auth = StaticBearerAuth(MOCK_KEY)
        if not corpus.exists():  # before the progress bar shows
            raise TargetError(f"corpus not found: {corpus}")
        if chunk_overlap >= chunk_size:
            raise click.UsageError(
                f"--chunk-overlap ({chunk_overlap}) must be smaller than --chunk-size "
                f"({chunk_size})"
            )
        config = GenerationConfig(
            pairs_per_chunk=pairs_per_chunk,
            types=type_weights,
            styles=tuple(style.strip() for style in styles.split(",") if style.strip()),
            noise=noise,
            grounding_check=grounding_check,
            trivial_overlap=trivial_overlap,
            regenerate=regenerate,
            max_answer_words=max_answer_words,
            chunking=ChunkingConfig(max_chars=chunk_size, overlap_chars=chunk_overlap),
            eval_fraction=eval_fraction,
            seed=seed,
            concurrency=concurrency,
        )
    except (TargetError, ValueError) as error:
        raise click.ClickException(str(error)) from None

    progress = StageProgress(console, {"generating": "requests"})
    progress.start("generating")

    def on_progress(done: int, total: int) -> None:
        progress("generating", done, total)

    # The endpoint's key (and a password in its URL) never reaches a file or the terminal,
    # even when a reply echoes it.
    secrets = credential_secrets([auth], base_url) if base_url is not None else ()

    def mask(text: str) -> str:
        return mask_secrets(text, secrets)

    async def generate() -> Any:
        async with _endpoint(base_url, policy) as url:
            judge = Judge(model=model or MOCK_MODEL, base_url=url, auth=auth, timeout=timeout)
            return await generate_qa(
                corpus, output_dir, judge, config, text_field=text_field,
                on_progress=on_progress, mask=mask, links_out=follow_links_out,
            )  # fmt: skip

    summary = run_workflow(
        generate,
        progress=progress,
        output_dir=output_dir,
        refused=(CorpusError,),
        quiet_logs=True,  # refused replies are counted in the summary instead
    )
    if as_json:
        echo_json(summary)
    else:
        out = Console()
        out.print(_summary_table(summary))
        out.print(_types_table(summary))
        out.print(wrote_splits(summary.train_path, summary.eval_path))
    skipped = summary.records_skipped
    print_skipped(console, skipped[:_SHOWN_SKIPPED], len(skipped))
    for failure in summary.failures:
        console.print(f"[red]request failed:[/] {escape(failure)}", soft_wrap=True)
    if base_url is None:
        console.print(
            f"[bold yellow]note:[/] the embedded mock model wrote these pairs "
            f"(policy {escape(mock_policy or '')}); pass --base-url and --model for a real model",
            soft_wrap=True,
        )
    if summary.tasks_failed:
        raise ChecksFailed(f"{summary.tasks_failed} of {summary.tasks} model requests failed")
    if summary.pairs_kept == 0:
        raise ChecksFailed(
            "no question-answer pairs were kept: "
            f"{summary.tasks_skipped} of {summary.tasks} requests got a bad reply twice, "
            f"{summary.pairs_generated} pairs were generated; check that the model writes "
            "the JSON object asked for and that its answers are stated in the chunk"
        )
