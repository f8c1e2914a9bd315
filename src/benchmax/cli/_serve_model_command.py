"""``benchmax serve-model CHECKPOINT``: a model's weights behind an OpenAI-compatible endpoint.

The checkpoint is any model spec ``benchmax.training.load_model`` takes (a Hugging Face
model directory, a PEFT adapter directory on its base, a built-in name, a Hub id); it is
served by the embedded sampler (``benchmax.training.PolicySampler``: batched, exact token
ids and logprobs) until Ctrl-C or SIGTERM, so ``benchmax run --base-url URL --model NAME``
and ``compare`` can evaluate it. An adapter is merged into its base first (faster to
sample, same outputs). torch and transformers are imported only when the command runs.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import click

from benchmax.cli._options import listen_options
from benchmax.cli._signals import terminate_like_interrupt

__all__ = ["serve_model_command"]


@click.command("serve-model")
@click.argument("checkpoint")
@listen_options()
@click.option(
    "--model-name",
    default=None,
    help="The model name requests must use (default: CHECKPOINT as given, as vLLM does).",
)
@click.option(
    "--max-batch-size",
    type=click.IntRange(1),
    default=64,
    show_default=True,
    help="Most requests decoded together.",
)
@click.option(
    "--threads",
    type=click.IntRange(1),
    default=None,
    help="torch CPU threads (default: torch's; 1 is fastest on a small shared CPU, see "
    "docs/sampler.md).",
)
def serve_model_command(
    checkpoint: str,
    host: str,
    port: int,
    model_name: str | None,
    max_batch_size: int,
    threads: int | None,
) -> None:
    """Serve CHECKPOINT's weights over an OpenAI-compatible API until interrupted.

    CHECKPOINT is a model directory (a training checkpoint, a PEFT adapter on its base),
    a built-in name (smollm2-135m-instruct) or a Hugging Face Hub id. Then, e.g.:
    benchmax run ENV --base-url http://127.0.0.1:8000/v1 --model CHECKPOINT --tokens
    """
    try:
        import torch

        from benchmax.training import PolicySampler, load_model
    except ModuleNotFoundError as error:
        raise click.ClickException(
            f"serve-model needs the trl extra (pip install 'benchmax[trl]'): {error}"
        ) from None
    if threads is not None:
        torch.set_num_threads(threads)
    name = model_name or checkpoint
    click.echo(f"loading {checkpoint} ...", err=True)
    started = time.perf_counter()
    try:
        model, tokenizer = load_model(checkpoint)
    except (ValueError, OSError, ModuleNotFoundError) as error:
        raise click.ClickException(str(error)) from None
    model = _merged(model)
    if getattr(tokenizer, "chat_template", None) is None:
        raise click.ClickException(
            f"{checkpoint}'s tokenizer has no chat template: chat completions cannot be served"
        )
    sampler = PolicySampler(
        model, tokenizer, model_name=name, host=host, port=port, max_batch_size=max_batch_size
    )
    try:
        sampler.start()
    except OSError as error:
        raise click.ClickException(f"cannot serve on {host}:{port}: {error}") from None
    stop = threading.Event()
    try:
        with terminate_like_interrupt():
            click.echo(
                f"serving {checkpoint} as model {name!r} on {sampler.base_url} "
                f"(loaded in {time.perf_counter() - started:.0f} s)"
            )
            click.echo("press Ctrl-C to stop")
            while not stop.wait(3600):
                pass
    except KeyboardInterrupt:
        pass
    finally:
        sampler.close()


def _merged(model: Any) -> Any:
    """A PEFT model with its adapter merged into the base weights; others as they are."""
    merge = getattr(model, "merge_and_unload", None)
    return merge() if callable(merge) else model
