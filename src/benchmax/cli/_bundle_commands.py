"""``benchmax bundle`` (write a bundle file) and ``benchmax inspect`` (read one safely)."""

from __future__ import annotations

import contextlib
import importlib
import inspect
import logging
import re
import site
import sysconfig
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

import click
from rich.console import Console
from rich.markup import escape
from rich.syntax import Syntax

from benchmax.cli._exit_codes import ChecksFailed
from benchmax.cli._json_output import echo_json
from benchmax.cli._options import json_option, output_option
from benchmax.cli._safe_text import terminal_safe
from benchmax.cli._targets import EnvTarget, TargetError, load_class_target, parse_env_args

if TYPE_CHECKING:
    from benchmax.bundle import Bundle

__all__ = ["bundle_class_target", "bundle_command", "import_local_module", "inspect_command"]

_AUTO_CAPTURED = re.compile(r"auto-bundling local module\(s\): (.+?) \(")


class _CapturedModules(logging.Handler):
    """Collects the module names the bundler reports it auto-captured."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.names: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        match = _AUTO_CAPTURED.search(record.getMessage())
        if match is not None:
            self.names.extend(name.strip() for name in match.group(1).split(","))


@contextlib.contextmanager
def _auto_captured() -> Iterator[_CapturedModules]:
    handler = _CapturedModules()
    logger = logging.getLogger("benchmax.bundle")
    logger.addHandler(handler)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)


@click.command("bundle")
@click.argument("target")
@click.option(
    "--env-arg",
    "env_arg_pairs",
    multiple=True,
    metavar="KEY=VALUE",
    help="Constructor argument stored in the bundle (JSON, else string). Repeatable.",
)
@click.option(
    "--pip-dependency",
    "pip_dependencies",
    multiple=True,
    metavar="SPEC",
    help="PEP 508 requirement the runtime must install. Repeatable.",
)
@click.option(
    "--local-module",
    "local_module_names",
    multiple=True,
    metavar="NAME",
    help="Importable module whose source travels in the bundle, e.g. a helper module beside "
    "a single-file environment outside any pyproject.toml project. Repeatable.",
)
@output_option("the bundle file", required=True)
def bundle_command(
    target: str,
    env_arg_pairs: tuple[str, ...],
    pip_dependencies: tuple[str, ...],
    local_module_names: tuple[str, ...],
    output: Path,
) -> None:
    """Bundle the environment class TARGET (file.py:Class, package.module:Class or an
    installed environment name) into a file.

    Modules of TARGET's project (the directory of the nearest pyproject.toml above its
    file) are captured automatically; name other local modules with --local-module.
    """
    from benchmax._cli_wording import cli_wording
    from benchmax.bundle import BundlingError, bundle_digest, save_bundle

    try:
        env_target = load_class_target(target)
        env_args = parse_env_args(env_arg_pairs)
        note = _check_constructor_args(env_target.env_class, env_args)
        named_modules = [import_local_module(name) for name in local_module_names]
    except TargetError as error:
        raise click.ClickException(str(error)) from None
    try:
        with cli_wording():  # errors name --local-module / --pip-dependency
            bundle, modules = bundle_class_target(
                env_target, env_args, pip_dependencies, extra_local_modules=named_modules
            )
        output.parent.mkdir(parents=True, exist_ok=True)
        save_bundle(bundle, output)
    except (BundlingError, OSError) as error:
        raise click.ClickException(f"cannot bundle {target}: {error}") from None
    if note is not None:
        Console(stderr=True, soft_wrap=True).print(
            f"[yellow]note:[/] {escape(terminal_safe(note, keep_newlines=False))}"
        )
    _print_facts(
        Console(soft_wrap=True),
        [
            ("wrote", str(output)),
            ("digest", bundle_digest(bundle)),
            ("size", f"{output.stat().st_size} bytes"),
            ("dependencies", ", ".join(bundle.metadata.pip_dependencies) or "(none)"),
            ("local modules", ", ".join(modules) or "(none)"),
        ],
    )


def bundle_class_target(
    env_target: EnvTarget,
    env_args: dict[str, Any],
    pip_dependencies: Sequence[str],
    *,
    extra_local_modules: Sequence[ModuleType] = (),
) -> tuple[Bundle, list[str]]:
    """The bundle ``benchmax bundle`` writes for ``env_target`` (with ``extra_local_modules``
    named by ``--local-module``), and the names of the local modules whose source travels
    in it. Raises ``BundlingError``."""
    from benchmax.bundle import _project_root_for_module, dump_bundle

    # A target module outside any pyproject project is not captured automatically (capture
    # covers project modules): pass it explicitly so its source travels. An installed one
    # stays a dependency (--pip-dependency).
    module = env_target.module
    local_modules = (
        [module]
        if module is not None
        and _project_root_for_module(module) is None
        and not _installed(module)
        else []
    )
    local_modules += [m for m in extra_local_modules if m not in local_modules]
    with _auto_captured() as captured:
        bundle = dump_bundle(
            env_target.env_class,
            constructor_args=env_args,
            pip_dependencies=list(pip_dependencies),
            local_modules=local_modules,
        )
    return bundle, sorted({*(m.__name__ for m in local_modules), *captured.names})


def _check_constructor_args(env_class: type, env_args: Mapping[str, Any]) -> str | None:
    """Refuse, now rather than when the bundle is run, arguments the class cannot take.

    An ``__init__`` taking ``**kwargs`` accepts any name, but usually passes them on to
    ``super().__init__`` (``BaseEnv``'s limits): the note returned names the arguments no
    ``__init__`` up to the first one without ``**kwargs`` declares (``None``: nothing to
    say), since constructing the bundled environment will refuse them if they are passed on.
    """
    try:
        signature = inspect.signature(env_class)
    except (TypeError, ValueError):
        return None  # no introspectable signature: nothing to check against
    try:
        signature.bind_partial(**env_args)
    except TypeError as error:
        raise TargetError(
            f"{env_class.__name__} does not accept these constructor arguments: {error}"
        ) from None
    unknown = [name for name in env_args if name not in _named_parameters(signature)]
    if not unknown or not _takes_kwargs(signature):
        return None
    for base in env_class.__mro__[1:]:
        if base is object or "__init__" not in vars(base):
            continue
        try:
            base_signature = inspect.signature(base.__init__)  # type: ignore[misc]
        except (TypeError, ValueError):
            return None
        unknown = [name for name in unknown if name not in _named_parameters(base_signature)]
        if not unknown:
            return None
        if not _takes_kwargs(base_signature):
            names = ", ".join(repr(name) for name in unknown)
            return (
                f"{env_class.__name__}.__init__ takes **kwargs, but no parameter of it or of "
                f"{base.__qualname__}.__init__ is named {names}: if {env_class.__name__} "
                "passes its **kwargs on, the bundle will fail when it is run "
                "(benchmax validate constructs it)"
            )
    return None


def _named_parameters(signature: inspect.Signature) -> set[str]:
    return {
        p.name
        for p in signature.parameters.values()
        if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
    }


def _takes_kwargs(signature: inspect.Signature) -> bool:
    return any(p.kind is p.VAR_KEYWORD for p in signature.parameters.values())


def import_local_module(name: str) -> ModuleType:
    """The module ``--local-module NAME`` names; ``TargetError`` when it cannot be imported."""
    try:
        return importlib.import_module(name)
    except Exception as error:
        raise TargetError(
            f"cannot import --local-module {name!r}: {type(error).__name__}: {error}"
        ) from None


def _print_facts(console: Console, facts: list[tuple[str, str]]) -> None:
    """``label: value`` lines, values printed literally (no rich markup, controls escaped)."""
    for label, value in facts:
        console.print(f"{label + ':':<14} {escape(terminal_safe(value, keep_newlines=False))}")


def _installed(module: ModuleType) -> bool:
    """Whether ``module`` comes from site-packages (an installed distribution)."""
    location = getattr(module, "__file__", None)
    if location is None:
        return False
    roots = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    roots.update(site.getsitepackages())
    return any(Path(location).resolve().is_relative_to(Path(root).resolve()) for root in roots)


@click.command("inspect")
@click.argument("file", type=click.Path(path_type=Path, dir_okay=False))
@json_option()
def inspect_command(file: Path, as_json: bool) -> None:
    """Show what the bundle FILE holds without loading it (nothing is unpickled).

    Verifies the digest, prints the metadata, checks compatibility with this runtime and
    shows the recorded environment source. Exit status 1 when the bundle is incompatible.
    """
    from benchmax.bundle import (
        BundlingError,
        IncompatibleRuntimeError,
        bundle_digest,
        read_bundle,
        validate_bundle_compatibility,
    )

    try:
        bundle = read_bundle(file)
    except (BundlingError, OSError) as error:
        raise click.ClickException(f"cannot read bundle {file}: {error}") from None
    metadata = bundle.metadata
    try:
        validate_bundle_compatibility(metadata)
        incompatibility = None
    except IncompatibleRuntimeError as error:
        incompatibility = str(error)
    if as_json:
        document = {
            "bundle": str(file),
            "digest": bundle_digest(bundle),
            "digest_verified": True,  # read_bundle refuses a file whose digest differs
            "pickle_bytes": len(bundle.pickled),
            "python_version": metadata.python_version,
            "benchmax_version": metadata.benchmax_version,
            "pip_dependencies": list(metadata.pip_dependencies),
            "compatible": incompatibility is None,
            "incompatibility": incompatibility,
            "env_class_source": metadata.env_class_source,
        }
        echo_json(document)  # ASCII: controls arrive escaped
    else:
        _print_inspection(file, bundle, incompatibility)
    if incompatibility is not None:
        raise ChecksFailed("the bundle is incompatible with this runtime", reported=as_json)


def _print_inspection(file: Path, bundle: Any, incompatibility: str | None) -> None:
    """What ``inspect`` prints without ``--json``: the facts, compatibility, the source."""
    from benchmax.bundle import bundle_digest

    metadata = bundle.metadata
    console = Console(soft_wrap=True)
    _print_facts(
        console,
        [
            ("bundle", str(file)),
            ("digest", f"{bundle_digest(bundle)} (verified)"),
            ("pickle", f"{len(bundle.pickled)} bytes (not loaded)"),
            ("python", metadata.python_version),
            ("benchmax", metadata.benchmax_version),
            ("dependencies", ", ".join(metadata.pip_dependencies) or "(none)"),
        ],
    )
    if incompatibility is not None:
        console.print(
            "compatibility: [red]incompatible with this runtime[/]: "
            f"{escape(terminal_safe(incompatibility, keep_newlines=False))}"
        )
    else:
        console.print("compatibility: [green]compatible with this runtime[/]")
    if not metadata.env_class_source:
        console.print("environment source: (not recorded)")
        return
    console.print("environment source:")
    source = terminal_safe(metadata.env_class_source)
    if console.is_terminal:
        console.print(Syntax(source, "python", word_wrap=True))
    else:  # piped: the source as recorded (controls escaped), never cut to a terminal width
        console.out(source.rstrip("\n"), highlight=False)
