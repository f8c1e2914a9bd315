"""Resolve command-line targets: environment classes, bundle files, installed names,
policies and env args.

An installed name is an entry point of the group ``benchmax.environments``
(:data:`ENTRY_POINT_GROUP`) whose value is an ``Environment`` subclass, declared by any
installed distribution, e.g. in its ``pyproject.toml``::

    [project.entry-points."benchmax.environments"]
    my-env = "my_env.env:MyEnv"

``benchmax run my-env`` then runs ``MyEnv`` (every command taking a TARGET accepts the
name). A name two distributions declare, and an entry point that cannot be loaded or is
not an environment class, are refused with one line saying so.
"""

from __future__ import annotations

import difflib
import importlib
import importlib.metadata
import inspect
import json
import os
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, cast

import click

from benchmax._mock_url import MOCK_URL_MARKER, substitute_mock, uses_mock
from benchmax._secret_masking import remember, url_passwords
from benchmax.cli._errors import CLIError
from benchmax.envs.environment import Environment

__all__ = [
    "ENTRY_POINT_GROUP",
    "MOCK_URL_MARKER",
    "EnvTarget",
    "USER_CODE_ERRORS",
    "TargetError",
    "described",
    "import_file",
    "import_object",
    "installed_names",
    "load_bundle_target",
    "load_class_target",
    "load_named_target",
    "load_target",
    "parse_env_args",
    "substitute_mock",
    "uses_mock",
]


ENTRY_POINT_GROUP = "benchmax.environments"
"""The entry-point group naming installed environments (see the module docstring)."""

# What a target given as an installed name looks like: no path separator, no ':'.
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]*$")


class TargetError(CLIError):
    """A target, env arg or policy given on the command line cannot be used."""


USER_CODE_ERRORS: tuple[type[BaseException], ...] = (Exception, SystemExit, KeyboardInterrupt)
"""What user code may raise while it is imported or constructed, reported as one line.
(``SystemExit`` or ``KeyboardInterrupt`` from a module's top level is its defect, not a
request to stop ``benchmax``.)"""


def described(error: BaseException) -> str:
    """``Type: message``, or just ``Type`` when the message is empty."""
    text = str(error)
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


@dataclass(frozen=True, slots=True)
class EnvTarget:
    """An environment class ready to construct, with what defines it for the results header."""

    env_class: type[Environment[Any, Any]]
    constructor_args: Mapping[str, Any] = field(default_factory=dict)
    module: ModuleType | None = None
    bundle_digest: str | None = None

    @property
    def label(self) -> str:
        return self.env_class.__name__

    def construct(self, args: Mapping[str, Any]) -> Environment[Any, Any]:
        """The environment built with ``args``; ``TargetError`` when its constructor
        raises (an argument it does not take gets "did you mean" from its signature)."""
        try:
            return self.env_class(**args)
        except USER_CODE_ERRORS as error:
            hint = _argument_hint(self.env_class, args, error)
            raise TargetError(f"cannot construct {self.label}: {described(error)}{hint}") from error


def constructor_parameters(env_class: type) -> list[str]:
    """The keyword arguments ``env_class`` takes: its ``__init__``'s named parameters and,
    while an ``__init__`` passes ``**kwargs`` on, those of the classes above it."""
    names: dict[str, None] = {}
    for klass in env_class.__mro__:
        init = klass.__dict__.get("__init__")
        if init is None:
            continue
        try:
            parameters = inspect.signature(init).parameters.values()
        except (TypeError, ValueError):
            break
        names.update(
            (p.name, None)
            for p in parameters
            if p.name != "self" and p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)
        )
        if not any(p.kind is p.VAR_KEYWORD for p in parameters):
            break
    return list(names)


_UNEXPECTED = re.compile(r"unexpected keyword argument '([^']+)'")


def _argument_hint(env_class: type, args: Mapping[str, Any], error: BaseException) -> str:
    """`` (did you mean 'max_turns'? ...)`` for an argument the constructor refused."""
    found = _UNEXPECTED.search(str(error)) if isinstance(error, TypeError) else None
    if found is None or found[1] not in args:
        return ""
    known = constructor_parameters(env_class)
    close = difflib.get_close_matches(found[1], known, n=3, cutoff=0.6)
    if close:
        return f" (did you mean {' or '.join(repr(name) for name in close)}?)"
    return f" ({env_class.__name__} takes: {', '.join(known)})" if known else ""


def import_file(path: Path) -> ModuleType:
    """Import ``path`` under its module name (its package chain, found via ``__init__.py``).

    The directory above the top package goes first on ``sys.path``; a different module
    already registered under that name is replaced.
    """
    path = path.resolve()
    if not path.is_file():
        raise TargetError(f"no such file: {path}")
    parts = [path.stem]
    root = path.parent
    while (root / "__init__.py").is_file():
        parts.insert(0, root.name)
        root = root.parent
    name = ".".join(parts)
    # First on the path, so the package is found here even when an earlier import put
    # another directory holding a package of the same name in front.
    if str(root) in sys.path:
        sys.path.remove(str(root))
    sys.path.insert(0, str(root))
    for depth in range(1, len(parts) + 1):
        prefix = ".".join(parts[:depth])
        existing = sys.modules.get(prefix)
        expected = root.joinpath(*parts[:depth])
        if existing is not None and not _module_lives_at(existing, expected):
            for key in [k for k in sys.modules if k == prefix or k.startswith(prefix + ".")]:
                del sys.modules[key]
    importlib.invalidate_caches()
    try:
        return importlib.import_module(name)
    except USER_CODE_ERRORS as error:
        raise TargetError(f"cannot import {path}: {described(error)}") from error


def _module_lives_at(module: ModuleType, expected: Path) -> bool:
    location = getattr(module, "__file__", None)
    if location is None:
        return False
    location = Path(location).resolve()
    return location in (expected.with_suffix(".py"), expected / "__init__.py")


def import_object(spec: str, what: str) -> tuple[Any, ModuleType]:
    """Resolve ``path/to/file.py:Name`` or ``package.module:Name``."""
    module_part, colon, attribute = spec.rpartition(":")
    if not colon or not module_part or not attribute:
        raise TargetError(
            f"{what} {spec!r} must look like path/to/file.py:Name or package.module:Name"
        )
    if module_part.endswith(".py"):
        module = import_file(Path(module_part))
    else:
        if os.getcwd() not in sys.path:
            sys.path.insert(0, os.getcwd())
        try:
            module = importlib.import_module(module_part)
        except USER_CODE_ERRORS as error:
            raise TargetError(f"cannot import {module_part!r}: {described(error)}") from error
    value: Any = module
    for part in attribute.split("."):
        try:
            value = getattr(value, part)
        except AttributeError:
            hint = _did_you_mean(part, [n for n in dir(value) if not n.startswith("_")])
            if not hint and what == "target" and (found := _environment_classes(module)):
                hint = f"; environment classes in it: {', '.join(found)}"
            # A file is named as given (a module named "env" says little about which file).
            where = module_part if module_part.endswith(".py") else module.__name__
            raise TargetError(f"{where} has no {attribute!r}{hint}") from None
    return value, module


def _did_you_mean(name: str, candidates: Sequence[str]) -> str:
    """`` (did you mean 'X'?)`` for the closest of ``candidates``, else ``""``."""
    import difflib

    close = difflib.get_close_matches(name, candidates, n=1, cutoff=0.6)
    if not close:
        folded = {candidate.lower(): candidate for candidate in candidates}
        close = [folded[name.lower()]] if name.lower() in folded else []
    return f" (did you mean {close[0]!r}?)" if close else ""


def _environment_classes(module: ModuleType) -> list[str]:
    return sorted(
        name
        for name, value in vars(module).items()
        if isinstance(value, type)
        and issubclass(value, Environment)
        and not getattr(value, "__abstractmethods__", ())
        and getattr(value, "__module__", None) == module.__name__
    )


def load_class_target(spec: str) -> EnvTarget:
    """An environment class named as ``file.py:Class``, ``package.module:Class`` or an
    installed name (``load_named_target``)."""
    if ":" not in spec and _is_name(spec):
        return load_named_target(spec)
    env_class, module = import_object(spec, "target")
    _check_environment_class(env_class, spec, module)
    return EnvTarget(env_class=env_class, module=module)


def _check_environment_class(
    env_class: object, what: str, module: ModuleType | None = None
) -> None:
    if not isinstance(env_class, type) or not issubclass(env_class, Environment):
        here = ""
        if module is not None and (found := _environment_classes(module)):
            here = f"; environment classes in {module.__name__}: {', '.join(found)}"
        raise TargetError(f"{what} is not an Environment subclass{here}")
    abstract = sorted(getattr(env_class, "__abstractmethods__", ()))
    if abstract:
        raise TargetError(f"{what} has unimplemented abstract members: {', '.join(abstract)}")


def _is_name(spec: str) -> bool:
    return bool(_NAME.match(spec)) and not spec.endswith(".py")


def installed_names() -> dict[str, list[importlib.metadata.EntryPoint]]:
    """The entry points of :data:`ENTRY_POINT_GROUP` by name (several when distributions
    collide), from every installed distribution."""
    found: dict[str, list[importlib.metadata.EntryPoint]] = {}
    for entry_point in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        found.setdefault(entry_point.name, []).append(entry_point)
    return found


def load_named_target(name: str) -> EnvTarget:
    """The environment class an installed distribution names ``name`` in the
    ``benchmax.environments`` entry-point group.

    Raises ``TargetError`` (one line) when no distribution declares the name (the
    message lists the installed names), when several do (naming each distribution and
    value), and when the entry point cannot be imported or is not an environment class.
    """
    declared = installed_names()
    entry_points = declared.get(name, [])
    if not entry_points:
        known = ", ".join(sorted(declared)) or "none"
        raise TargetError(
            f"{name!r} is not a file, a file.py:Class or module:Class, nor an installed "
            f"environment name (names in the {ENTRY_POINT_GROUP!r} entry points: {known})"
        )
    if len({ep.value for ep in entry_points}) > 1:
        sources = "; ".join(f"{_distribution(ep)}: {ep.value}" for ep in entry_points)
        raise TargetError(
            f"environment name {name!r} is declared by more than one installed package "
            f"({sources}): run one by its module:Class instead"
        )
    entry_point = entry_points[0]
    where = f"environment name {name!r} ({entry_point.value} from {_distribution(entry_point)})"
    try:
        env_class = entry_point.load()
    except USER_CODE_ERRORS as error:
        raise TargetError(f"{where} cannot be loaded: {described(error)}") from error
    _check_environment_class(env_class, where)
    module = sys.modules.get(getattr(env_class, "__module__", ""))
    return EnvTarget(env_class=env_class, module=module)


def _distribution(entry_point: importlib.metadata.EntryPoint) -> str:
    dist = entry_point.dist
    if dist is None:
        return "an unknown distribution"
    return f"{dist.name} {dist.version}"


def load_bundle_target(path: Path) -> EnvTarget:
    """An environment from a bundle file (this executes the bundle's code)."""
    from benchmax.bundle import (
        BundlingError,
        IncompatibleRuntimeError,
        bundle_digest,
        load_bundle,
        read_bundle,
    )

    if not path.is_file():
        raise TargetError(f"bundle file not found: {path}")
    try:
        bundle = read_bundle(path)
        loaded = load_bundle(bundle, instantiate=False)
        env_class, constructor_args = cast(
            tuple[type[Environment[Any, Any]], dict[str, Any]], loaded
        )
    except (BundlingError, IncompatibleRuntimeError, OSError) as error:
        raise TargetError(f"cannot load bundle {path}: {error}") from error
    except USER_CODE_ERRORS as error:  # the bundle's own code failed while loading
        raise TargetError(f"cannot load bundle {path}: {described(error)}") from error
    return EnvTarget(
        env_class=env_class,
        constructor_args=dict(constructor_args),
        bundle_digest=bundle_digest(bundle),
    )


def load_target(spec: str) -> EnvTarget:
    """``file.py:Class``, ``package.module:Class``, a bundle file or an installed name
    (a name that is not an existing file; see ``load_named_target``)."""
    if ":" in spec and not Path(spec).is_file():
        return load_class_target(spec)
    if spec.endswith(".py"):
        raise TargetError(f"target {spec!r} must name a class: {spec}:ClassName")
    if (
        not Path(spec).exists()
        and _is_name(spec)
        and (spec in installed_names() or "." not in spec)
    ):
        return load_named_target(spec)
    if not Path(spec).exists() and "." in spec and not spec.endswith(".bundle"):
        head, _, name = spec.rpartition(".")  # a dotted path: package.module.Class
        raise TargetError(
            f"target {spec!r} is neither a bundle file nor a class: name a class as "
            f"path/to/file.py:Class or package.module:Class (did you mean {head + ':' + name!r}?)"
        )
    return load_bundle_target(Path(spec))


def parse_env_args(pairs: Sequence[str]) -> dict[str, Any]:
    """``KEY=VALUE`` pairs; each value is parsed as JSON, falling back to the plain string.
    Passwords of URLs among the values are remembered as secrets (masked in all output)."""
    args: dict[str, Any] = {}
    for pair in pairs:
        key, equals, raw = pair.partition("=")
        key = key.strip()
        if not equals or not key.isidentifier():
            raise click.UsageError(
                f"invalid --env-arg {pair!r}: expected KEY=VALUE with a Python name"
            )
        try:
            args[key] = json.loads(raw, parse_constant=_not_json)
        except ValueError:
            args[key] = raw
    remember(*url_passwords(args))  # a password in a URL argument is never printed
    return args


def _not_json(constant: str) -> Any:
    """``NaN`` and ``Infinity`` are not JSON: such a value stays a plain string."""
    raise ValueError(f"{constant} is not a JSON value")
