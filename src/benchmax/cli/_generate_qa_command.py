"""``benchmax generate-qa``: question/answer datasets from a corpus, by a model or the mock."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from benchmax.auth import ModelAuth, StaticBearerAuth
from benchmax.cli._credentials import MOCK_KEY, bearer_from_variable
from benchmax.cli._options import api_key_env_option
from benchmax.cli._run_command import MOCK_MODEL, load_mock_policy
from benchmax.cli._targets import TargetError

__all__ = ["generate_qa_command"]


@contextlib.asynccontextmanager
async def _endpoint(base_url: str | None, policy: Any) -> AsyncIterator[str]:
    if base_url is not None:
        yield base_url
        return
    from benchmax.testing import MockModelServer

    async with MockModelServer(policy, record=False) as server:
        yield server.base_url


def _summary_table(summary: Any) -> Table:
    table = Table(title="generate-qa summary", title_justify="left", show_header=False)
    table.add_column("what")
    table.add_column("count", justify="right")
    rows = [
        ("documents", summary.documents),
        ("  links out of the corpus, skipped", summary.links_skipped),
        ("chunks", summary.chunks),
        ("  from an earlier run", summary.chunks_cached),
        ("  retried after a bad reply", summary.chunks_retried),
        ("  skipped (bad reply twice)", summary.chunks_skipped),
        ("  failed (request error)", summary.chunks_failed),
        ("pairs generated", summary.pairs_generated),
        *((f"  dropped: {reason}", n) for reason, n in summary.dropped.items()),
        ("pairs kept", summary.pairs_kept),
        (f"train rows ({summary.train_documents} documents)", summary.train_rows),
        (f"eval rows ({summary.eval_documents} documents)", summary.eval_rows),
    ]
    for label, value in rows:
        table.add_row(escape(label), str(value))
    return table


@click.command("generate-qa")
@click.argument("corpus", type=click.Path(path_type=Path))
@click.option(
    "-o",
    "--output",
    "output_dir",
    required=True,
    type=click.Path(path_type=Path, file_okay=False),
    help="Directory for train.jsonl, eval.jsonl and the resume checkpoint.",
)
@click.option("--model", metavar="NAME", help="Model name (required with --base-url).")
@click.option(
    "--base-url",
    metavar="URL",
    help="OpenAI-compatible endpoint; without it the embedded mock model answers.",
)
@api_key_env_option()
@click.option(
    "--mock-policy",
    metavar="POLICY",
    help="Policy of the embedded mock: module:function or file.py:function.",
)
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
@click.option(
    "--eval-fraction",
    type=click.FloatRange(0, 1, max_open=True),
    default=0.2,
    show_default=True,
    help="Share of rows for eval.jsonl (whole documents).",
)
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the split.")
@click.option(
    "--concurrency",
    type=click.IntRange(min=1),
    default=4,
    show_default=True,
    help="Model requests in flight at once.",
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=120.0,
    show_default=True,
    help="Seconds for one model request.",
)
@click.option(
    "--follow-links-out",
    is_flag=True,
    help="Also read symbolic links that lead out of CORPUS (skipped and counted by default).",
)
def generate_qa_command(
    corpus: Path,
    output_dir: Path,
    model: str | None,
    base_url: str | None,
    api_key_env: str | None,
    mock_policy: str | None,
    text_field: str,
    pairs_per_chunk: int,
    chunk_size: int,
    chunk_overlap: int,
    max_answer_words: int,
    eval_fraction: float,
    seed: int,
    concurrency: int,
    timeout: float,
    follow_links_out: bool,
) -> None:
    """Write train.jsonl and eval.jsonl of questions about CORPUS (a file or directory of
    .txt, .md and .jsonl documents) to the output directory.

    Re-running with the same output directory reuses every chunk already answered.
    """
    from benchmax.datagen import ChunkingConfig, CorpusError, GenerationConfig, generate_qa
    from benchmax.rewards import Judge
    from benchmax.runner import NoModelAuth
    from benchmax.runner._config import credential_secrets, mask_secrets

    console = Console(stderr=True)
    try:
        if base_url is not None:
            if model is None:
                raise TargetError("--model is required with --base-url")
            if mock_policy is not None:
                raise TargetError("--mock-policy needs the embedded mock (omit --base-url)")
            auth: ModelAuth = (
                bearer_from_variable(api_key_env, "--api-key-env") if api_key_env else NoModelAuth()
            )
            policy = None
        else:
            if mock_policy is None:
                raise TargetError(
                    "without --base-url the embedded mock model answers: give it a question "
                    "writer with --mock-policy (e.g. examples/corpus/policy.py:reply)"
                )
            policy = load_mock_policy(mock_policy)
            auth = StaticBearerAuth(MOCK_KEY)
        if not corpus.exists():  # before the progress bar shows
            raise TargetError(f"corpus not found: {corpus}")
        if chunk_overlap >= chunk_size:
            raise TargetError(
                f"--chunk-overlap ({chunk_overlap}) must be smaller than --chunk-size "
                f"({chunk_size})"
            )
        config = GenerationConfig(
            pairs_per_chunk=pairs_per_chunk,
            max_answer_words=max_answer_words,
            chunking=ChunkingConfig(max_chars=chunk_size, overlap_chars=chunk_overlap),
            eval_fraction=eval_fraction,
            seed=seed,
            concurrency=concurrency,
        )
    except (TargetError, ValueError) as error:
        raise click.ClickException(str(error)) from None

    bar = Progress(
        TextColumn("[bold]generating"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("chunks"),
        TimeElapsedColumn(),
        console=console,
    )
    task = bar.add_task("chunks", total=None)

    def on_progress(done: int, total: int) -> None:
        bar.update(task, completed=done, total=total)

    # The endpoint's key (and a password in its URL) never reaches a file or the terminal,
    # even when a reply echoes it.
    secrets = credential_secrets([auth], base_url) if base_url is not None else ()

    def mask(text: str) -> str:
        return mask_secrets(text, secrets)

    async def generate() -> Any:
        async with _endpoint(base_url, policy) as url:
            judge = Judge(model=model or MOCK_MODEL, base_url=url, auth=auth, timeout=timeout)
            with bar:
                return await generate_qa(
                    corpus, output_dir, judge, config, text_field=text_field,
                    on_progress=on_progress, mask=mask, links_out=follow_links_out,
                )  # fmt: skip

    quiet = logging.NullHandler()  # refused replies are counted in the summary instead
    logging.getLogger().addHandler(quiet)
    try:
        summary = asyncio.run(generate())
    except CorpusError as error:
        raise click.ClickException(str(error)) from None
    except OSError as error:
        raise click.ClickException(f"cannot write to {output_dir}: {error}") from None
    finally:
        logging.getLogger().removeHandler(quiet)
    out = Console()
    out.print(_summary_table(summary))
    out.print(f"wrote {escape(str(summary.train_path))} and {escape(str(summary.eval_path))}")
    for failure in summary.failures:
        console.print(f"[red]request failed:[/] {escape(failure)}", soft_wrap=True)
    if base_url is None:
        console.print(
            f"[bold yellow]note:[/] the embedded mock model wrote these pairs "
            f"(policy {escape(mock_policy or '')}); pass --base-url and --model for a real model",
            soft_wrap=True,
        )
    if summary.chunks_failed:
        raise SystemExit(1)
    if summary.pairs_kept == 0:
        raise click.ClickException(
            "no question-answer pairs were kept: "
            f"{summary.chunks_skipped} of {summary.chunks} chunks got a bad reply twice, "
            f"{summary.pairs_generated} pairs were generated; check that the model writes "
            "the JSON object asked for and that its answers are stated in the chunk"
        )
