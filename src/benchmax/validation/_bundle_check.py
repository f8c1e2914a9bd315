"""The bundle checks: dump, file round trip, compatibility, a rollout in a fresh interpreter."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import sys
import tempfile
from pathlib import Path
from types import ModuleType

from benchmax._cli_wording import worded
from benchmax.bundle import (
    Bundle,
    BundlingError,
    IncompatibleRuntimeError,
    _project_root_for_module,
    bundle_digest,
    dump_bundle,
    read_bundle,
    save_bundle,
    validate_bundle_compatibility,
)
from benchmax.envs.shared_types import DatasetSplit
from benchmax.validation._imports import is_installed
from benchmax.validation._state import Validation

__all__ = ["check_bundle"]

_AUTO_CAPTURE_MARK = "auto-bundling local module(s): "
_STDERR_TAIL = 600


def _local_modules(validation: Validation) -> list[ModuleType]:
    """The env's module when it lies outside any project and is not installed (as ``bundle``)."""
    modules = list(validation.config.local_modules)
    module = sys.modules.get(validation.env_class.__module__)
    if (
        module is not None
        and module not in modules
        and getattr(module, "__file__", None)
        and _project_root_for_module(module) is None
        and not is_installed(module)
    ):
        modules.append(module)
    return modules


def _captured(validation: Validation, start: int) -> list[str]:
    names: list[str] = []
    for record in validation.logs.records[start:]:
        message = record.getMessage()
        if record.name.startswith("benchmax.bundle") and _AUTO_CAPTURE_MARK in message:
            listed = message.split(_AUTO_CAPTURE_MARK, 1)[1].split(" (", 1)[0]
            names.extend(name.strip() for name in listed.split(","))
    return names


def _dump(validation: Validation) -> Bundle | None:
    config = validation.config
    modules = _local_modules(validation)
    start = len(validation.logs.records)
    try:
        bundle = dump_bundle(
            validation.env_class,
            constructor_args=validation.constructor_args,
            pip_dependencies=list(config.pip_dependencies),
            local_modules=modules,
        )
    except BundlingError as error:
        refused = worded("dump_bundle refused the environment", "the environment cannot be bundled")
        validation.add("bundle: dump", "failed", f"{refused}: {error}")
        return None
    except Exception as error:
        validation.add(
            "bundle: dump",
            "failed",
            f"dump_bundle raised {type(error).__name__}: {error}; constructor arguments and "
            "everything the class references must be picklable",
        )
        return None
    captured = sorted({*(m.__name__ for m in modules), *_captured(validation, start)})
    by_value = ", ".join(captured) or "none"
    validation.add("bundle: dump", "passed", f"source captured by value: {by_value}")
    return bundle


async def check_bundle(validation: Validation, split: DatasetSplit | None) -> None:
    """Add the bundle checks to ``validation``; the rollout uses the first example of ``split``."""
    bundle = _dump(validation)
    if bundle is None:
        return
    with tempfile.TemporaryDirectory(prefix="benchmax-validate-") as scratch:
        path = Path(scratch) / "env.bundle"
        try:
            save_bundle(bundle, path)
            again = read_bundle(path)
        except (BundlingError, OSError) as error:
            validation.add("bundle: file round trip", "failed", f"{type(error).__name__}: {error}")
            return
        if again != bundle or bundle_digest(again) != bundle_digest(bundle):
            validation.add(
                "bundle: file round trip",
                "failed",
                "the bundle read back differs from the one saved",
            )
            return
        validation.add(
            "bundle: file round trip", "passed", f"digest {bundle_digest(bundle)[:16]}… verified"
        )
        try:
            validate_bundle_compatibility(again.metadata)
        except IncompatibleRuntimeError as error:
            validation.add("bundle: compatibility", "failed", str(error))
            return
        metadata = again.metadata
        validation.add(
            "bundle: compatibility",
            "passed",
            f"Python {metadata.python_version}, benchmax {metadata.benchmax_version}",
        )
        await _fresh_rollout(validation, path, split)
        _check_size(validation, bundle, path)


def _check_size(validation: Validation, bundle: Bundle, path: Path) -> None:
    size = path.stat().st_size
    limit = validation.config.bundle_size_warning
    shown = f"{size / 1024:.1f} KiB file ({len(bundle.pickled) / 1024:.1f} KiB pickle)"
    if len(bundle.pickled) > limit:
        validation.add(
            "bundle: size",
            "warning",
            f"{shown} is over {limit / 1024 / 1024:.1f} MiB: keep data in dataset files and "
            "large objects out of constructor arguments and class attributes",
        )
    else:
        validation.add("bundle: size", "passed", shown)


async def _fresh_rollout(validation: Validation, path: Path, split: DatasetSplit | None) -> None:
    name = "bundle: fresh interpreter"
    config = validation.config
    if not config.fresh_interpreter:
        validation.add(name, "skipped", "turned off (fresh_interpreter=False)")
        return
    if split is None:
        validation.add(name, "skipped", "needs a split that loads")
        return
    session = "validate-bundle.r0"
    arguments = [
        str(path),
        str(config.base_dir.resolve()),
        split,
        validation.mock.session_url(session),
        config.model if config.uses_mock else "mock-model",
        json.dumps(sorted(config.auth_providers)),
        json.dumps(dataclasses.asdict(config.bundle_hook_deadlines())),
    ]
    with tempfile.TemporaryDirectory(prefix="benchmax-validate-cwd-") as cwd:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-I",
            "-m",
            "benchmax.validation._fresh_rollout",
            *arguments,
            cwd=cwd,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        try:
            async with asyncio.timeout(config.subprocess_timeout):
                stdout, stderr = await process.communicate()
        except TimeoutError:
            process.kill()
            await process.wait()
            validation.add(
                name,
                "failed",
                f"the bundled rollout did not finish within {config.subprocess_timeout:g} s",
            )
            return
    if process.returncode != 0:
        tail = " ".join(stderr.decode(errors="replace").split())[-_STDERR_TAIL:]
        validation.add(
            name,
            "failed",
            f"loading and running the bundle in a fresh `python -I` failed (exit "
            f"{process.returncode}): {tail}. Everything the env needs must be captured "
            + worded(
                "(local_modules) or installed (pip_dependencies); data must come from base_dir",
                "(--local-module NAME) or installed (--pip-dependency SPEC); data must come "
                "from --data",
            ),
        )
        return
    try:
        result = json.loads(stdout.decode().strip().splitlines()[-1])
    except (ValueError, IndexError):
        validation.add(name, "failed", f"unexpected output from the fresh interpreter: {stdout!r}")
        return
    logging.getLogger(__name__).debug("fresh interpreter result: %s", result)
    reason = result["termination_reason"]
    detail = (
        f"{result['env_class']} loaded in a fresh interpreter and one {split} rollout "
        f"ended {reason} with rewards {result['rewards']}"
    )
    validation.add(name, "passed", detail)
