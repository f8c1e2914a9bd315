"""``benchmax train --num-processes N``: the N data-parallel processes, launched with
accelerate's launcher (``accelerate launch``, torch's elastic agent underneath).

Each process runs ``python -m benchmax.cli train --config <the merged settings>`` with the
launcher's ``WORLD_SIZE``/``RANK``; ``benchmax.training.train`` does the rest (rank 0 owns
the run directory). ``--accelerate-config FILE`` goes to the launcher as its
``--config_file`` (DeepSpeed, FSDP, mixed precision ...); without it the launch is plain
multi-process data parallel (NCCL on GPUs, gloo on CPU).

Ctrl-C: the elastic agent starts each process in a session of its own, so a terminal's
interrupt reaches only this launcher; it passes each interrupt on to every process (the
first stops them all after the current step with a checkpoint, the second at once), as
one process would see it. SIGTERM is the agent's: it sends SIGTERM on and kills what is
left after ``TORCH_ELASTIC_SHUTDOWN_TIMEOUT`` seconds (30 by default).
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any

from benchmax.training._config import TrainConfig, config_toml

__all__ = ["launch_processes"]

_HANDLED_BY_THE_AGENT = "SIGTERM,SIGHUP,SIGQUIT"  # SIGINT: passed on by this launcher


def launch_processes(config: TrainConfig, *, as_json: bool) -> int:
    """Run ``benchmax train`` in ``config.num_processes`` processes and wait for them;
    returns their exit status (0, or rank 0's when it failed: 130 after Ctrl-C).
    Raises ``ImportError`` without accelerate (the trl extra)."""
    import psutil
    from accelerate.commands.launch import launch_command, launch_command_parser
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError

    def pass_on(signum: int, frame: FrameType | None) -> None:
        for child in psutil.Process().children():
            try:
                child.send_signal(signal.SIGINT)
            except psutil.Error:  # already gone
                continue

    with tempfile.TemporaryDirectory(prefix="benchmax-train-") as folder:
        settings = Path(folder) / "config.toml"
        settings.write_text(config_toml(config), encoding="utf-8")
        arguments = launch_command_parser().parse_args(
            _launcher_arguments(config, settings, as_json=as_json)
        )
        previous = signal.signal(signal.SIGINT, pass_on)
        try:
            with _quiet_agent(), _environment(PET_SIGNALS_TO_HANDLE=_HANDLED_BY_THE_AGENT):
                launch_command(arguments)
        except ChildFailedError as error:
            return _exit_status(error)
        finally:
            signal.signal(signal.SIGINT, previous)
    return 0


def _launcher_arguments(config: TrainConfig, settings: Path, *, as_json: bool) -> list[str]:
    """``accelerate launch``'s arguments for the run in ``settings``."""
    arguments = [
        "--num_processes", str(config.num_processes),
        "--num_machines", "1",
        "--dynamo_backend", "no",
        "--main_process_port", str(_free_port()),
    ]  # fmt: skip
    if config.accelerate_config is not None:
        arguments += ["--config_file", str(config.accelerate_config)]
    else:
        arguments += ["--multi_gpu", "--mixed_precision", "no"]
    command = ["benchmax.cli", "train", "--config", str(settings)]
    return [*arguments, "--module", *command, *(["--json"] if as_json else [])]


def _exit_status(error: Any) -> int:
    """Rank 0's exit status when it failed (it reported why), else the first failing
    process's (128 + N for signal N)."""
    failure = error.failures.get(0) or error.get_first_failure()[1]
    code = int(failure.exitcode)
    return 128 - code if code < 0 else code or 1


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@contextmanager
def _environment(**values: str) -> Iterator[None]:
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@contextmanager
def _quiet_agent() -> Iterator[None]:
    """The processes report their own errors: the agent's logs of a failure (and
    accelerate's notes on defaults) would only repeat them."""
    loggers = [logging.getLogger(name) for name in ("torch.distributed", "accelerate")]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)
        sys.stderr.flush()
