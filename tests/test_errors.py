"""One exception tree: every exception class benchmax defines derives from
``benchmax.errors.BenchmaxError`` through its package's base, and keeps its 0.2 bases."""

from __future__ import annotations

import gc
import importlib
import inspect
import pickle
import pkgutil
import subprocess
import sys
from types import ModuleType

import click
import click.testing
import cloudpickle
import pytest

import benchmax
from benchmax._modelhttp.errors import ModelHTTPError
from benchmax.bundle import (
    BundleError,
    BundlingError,
    IncompatibleBenchmaxError,
    IncompatiblePythonError,
    IncompatibleRuntimeError,
)
from benchmax.capture import CaptureError
from benchmax.cli._errors import CLIError
from benchmax.datagen import DatagenError
from benchmax.envs import RolloutFailure
from benchmax.envs.errors import EnvError
from benchmax.errors import BenchmaxError
from benchmax.results import ResultsWriteError, ResumeMismatchError, RunError
from benchmax.rewards import JudgeError
from benchmax.runner import FailureShareExceeded, GroupContractError
from benchmax.scaffold import ScaffoldError
from benchmax.serving import ServingError
from benchmax.sources._errors import SourceError
from benchmax.testing import Fault, MockServerError
from benchmax.tools import ToolError, ToolLayerError
from benchmax.training import ConfigError, TrainingError

OPTIONAL = ("harbor", "ray", "torch", "trl", "transformers", "peft", "verifiers")
"""Optional dependencies: a module that needs one that is not installed is skipped."""

PACKAGE_BASES: dict[str, type[BaseException]] = {
    "benchmax": BenchmaxError,  # the top-level private modules (_cancellation, ...)
    "benchmax._modelhttp": ModelHTTPError,
    "benchmax.bundle": BundleError,
    "benchmax.capture": CaptureError,
    "benchmax.cli": CLIError,
    "benchmax.datagen": DatagenError,
    "benchmax.envs": EnvError,
    "benchmax.rewards": JudgeError,  # its one exception, a RolloutFailure (so an EnvError)
    "benchmax.results": RunError,
    "benchmax.runner": RunError,  # results' own: a run's errors and its record's share it
    "benchmax.scaffold": ScaffoldError,
    "benchmax.serving": ServingError,
    "benchmax.sources": SourceError,
    "benchmax.testing": MockServerError,
    "benchmax.tools": ToolLayerError,
    "benchmax.training": TrainingError,
}
"""Each package's base: every exception class defined in the package derives from it."""

BORROWED_BASES = {"benchmax.runner": "benchmax.results"}
"""Packages whose base is defined in the package below them (and re-exported)."""

FOREIGN_BASES: dict[str, set[type]] = {
    "benchmax._cancellation.StrayCancellation": {RuntimeError},
    "benchmax.cli._MeantOption": {click.NoSuchOption, click.UsageError, click.ClickException},
    "benchmax.cli._exit_codes.ChecksFailed": {click.ClickException},
    "benchmax.cli._exit_codes.DetailedError": {click.ClickException},
    "benchmax.cli._exit_codes.Untrustworthy": {click.ClickException},
    "benchmax.datagen._corpus.CorpusError": {ValueError},
    "benchmax.datagen._prompts.ReplyShapeError": {ValueError},
    "benchmax.datagen._trace_formats.TraceFormatError": {ValueError},
    "benchmax.datagen._traces.TracesError": {ValueError},
    "benchmax.envs._hook_errors.NotAsyncHook": {TypeError},
    "benchmax.envs.base._tool_table.DuplicateToolName": {ValueError},
    "benchmax.envs.shared_types.RewardShapeError": {ValueError},
    "benchmax.envs.shared_types.RolloutFailure": {RuntimeError},
    "benchmax.rewards.judge.JudgeError": {RuntimeError},
    "benchmax.scaffold.ScaffoldError": {ValueError},
    "benchmax.testing._completions.PolicyResultError": {TypeError},
    "benchmax.training._chat_format.RequestError": {ValueError},
    "benchmax.training._config.ConfigError": {ValueError},
}
"""The bases from outside benchmax (beyond ``Exception``) each class has kept from 0.2;
a class not listed has none."""

PUBLIC_SAMPLES: list[BaseException] = [
    RolloutFailure("sandbox_error", "the sandbox crashed"),
    JudgeError("the judge's verdict has no score"),
    ResultsWriteError("out.jsonl", OSError(28, "No space left on device")),
    ResumeMismatchError("out.jsonl", ["model differs", "seed differs"]),
    GroupContractError(3, "e" * 40, ValueError("bad reward"), hook="Env.compute_reward"),
    ToolError("no such file: a.txt"),
    ConfigError("learning_rate", "must be positive"),
    Fault.status(429, retry_after=1),
    FailureShareExceeded("stopped early: 20 of 20 rollouts (100%) ended model_error", ("e.g.",)),
]
"""One instance of each public exception class whose constructor is its own."""


def _benchmax_modules() -> list[ModuleType]:
    modules = [benchmax]
    for info in pkgutil.walk_packages(benchmax.__path__, prefix="benchmax."):
        if info.name.endswith(".__main__"):
            continue
        try:
            modules.append(importlib.import_module(info.name))
        except ImportError as error:
            if error.name and error.name.split(".")[0] in OPTIONAL:
                continue
            raise
    return modules


def _subclasses(cls: type[BaseException]) -> list[type[BaseException]]:
    found = []
    for child in cls.__subclasses__():
        found += [child, *_subclasses(child)]
    return found


def _defined_in_benchmax() -> dict[str, type[BaseException]]:
    """Every exception class defined in a benchmax module (at module level or not), by
    ``module.qualname``: each module is imported first."""
    _benchmax_modules()
    return {
        f"{cls.__module__}.{cls.__qualname__}": cls
        for cls in _subclasses(BaseException)
        if cls.__module__ == "benchmax" or cls.__module__.startswith("benchmax.")
    }


def _package(module: str) -> str:
    """``benchmax.<package>`` for a module in a package, else ``benchmax``."""
    name = ".".join(module.split(".")[:2])
    return name if hasattr(sys.modules.get(name), "__path__") else "benchmax"


def _without_their_base(classes: dict[str, type[BaseException]]) -> list[str]:
    """The classes not under BenchmaxError, or not under their package's base (a package
    missing from ``PACKAGE_BASES`` has none)."""
    return sorted(
        name
        for name, cls in classes.items()
        if not issubclass(cls, BenchmaxError)
        or not issubclass(cls, PACKAGE_BASES.get(_package(cls.__module__), ()))
    )


def _foreign_bases(cls: type) -> set[type]:
    return {
        base
        for base in cls.__mro__
        if not base.__module__.startswith("benchmax")
        and base not in (Exception, BaseException, object)
    }


def _public_exceptions() -> set[type[BaseException]]:
    public = set()
    for module in _benchmax_modules():
        if any(part.startswith("_") for part in module.__name__.split(".")):
            continue
        for name in getattr(module, "__all__", ()):
            try:
                value = getattr(module, name)
            except ImportError as error:  # a lazy name of an optional extra (torch, trl)
                if error.name and error.name.split(".")[0] in OPTIONAL:
                    continue
                raise
            if inspect.isclass(value) and issubclass(value, BaseException):
                public.add(value)
    return public


def test_every_exception_class_has_the_root_and_its_package_base() -> None:
    classes = _defined_in_benchmax()
    assert len(classes) >= 60  # the walk found them (62 when the tree was made)
    assert _without_their_base(classes) == []


def test_a_new_class_without_the_base_is_caught() -> None:
    def flagged() -> list[str]:
        probes = [  # held: a collection during the module walk would drop unheld classes
            type("Stray", (ValueError,), {"__module__": "benchmax.envs.base.stray"}),
            type("Beside", (BenchmaxError,), {"__module__": "benchmax.runner._stray"}),
            type("Elsewhere", (BenchmaxError,), {"__module__": "benchmax.validation._stray"}),
        ]
        found = _without_their_base(_defined_in_benchmax())
        del probes
        return found

    assert flagged() == [
        "benchmax.envs.base.stray.Stray",
        "benchmax.runner._stray.Beside",
        "benchmax.validation._stray.Elsewhere",
    ]
    gc.collect()  # the probes are gone again
    assert _without_their_base(_defined_in_benchmax()) == []


def test_each_package_base_is_defined_in_its_package_under_the_root() -> None:
    for package, base in PACKAGE_BASES.items():
        assert issubclass(base, BenchmaxError), package
        home = BORROWED_BASES.get(package, package)
        assert _package(base.__module__) == home, (package, base.__module__)
    packages = {_package(cls.__module__) for cls in _defined_in_benchmax().values()}
    assert packages == set(PACKAGE_BASES)


def test_the_0_2_bases_are_kept() -> None:
    classes = _defined_in_benchmax()
    assert set(FOREIGN_BASES) <= set(classes)
    for name, cls in classes.items():
        assert _foreign_bases(cls) == FOREIGN_BASES.get(name, set()), name
    assert issubclass(JudgeError, RolloutFailure)
    assert issubclass(IncompatiblePythonError, IncompatibleRuntimeError)
    assert issubclass(IncompatibleBenchmaxError, IncompatibleRuntimeError)
    assert not issubclass(BundlingError, IncompatibleRuntimeError)
    assert not issubclass(IncompatibleRuntimeError, BundlingError)
    assert issubclass(JudgeError, EnvError)
    for name in ("ExecutorError", "FailureShareExceeded", "JudgeCheckError"):
        assert issubclass(getattr(importlib.import_module("benchmax.runner"), name), RunError)
    assert issubclass(importlib.import_module("benchmax.results").ResultsFileError, RunError)


def test_the_root_is_exported_and_its_module_imports_nothing_from_benchmax() -> None:
    assert benchmax.BenchmaxError is BenchmaxError
    assert "BenchmaxError" in benchmax.__all__
    code = (
        "import sys, benchmax.errors;"
        " print(sorted(m for m in sys.modules if m.split('.')[0] == 'benchmax'))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert loaded.strip() == "['benchmax', 'benchmax.errors']"


def test_every_public_exception_with_its_own_constructor_has_a_sample() -> None:
    own = {
        cls
        for cls in _public_exceptions()
        for base in cls.__mro__
        if base.__module__.startswith("benchmax") and "__init__" in vars(base)
    }
    assert own == {type(sample) for sample in PUBLIC_SAMPLES}


@pytest.mark.parametrize("dumps", [pickle.dumps, cloudpickle.dumps])
@pytest.mark.parametrize("error", PUBLIC_SAMPLES, ids=lambda error: type(error).__name__)
def test_public_exceptions_survive_pickling(error: BaseException, dumps: object) -> None:
    assert callable(dumps)
    back = pickle.loads(dumps(error))
    assert type(back) is type(error)
    assert str(back) == str(error)
    assert back.args == error.args
    assert vars(back) == vars(error)
    assert isinstance(back, BenchmaxError)


def test_public_exceptions_with_the_plain_constructor_survive_pickling() -> None:
    plain = [
        cls
        for cls in _public_exceptions()
        if cls not in {type(sample) for sample in PUBLIC_SAMPLES}
    ]
    assert len(plain) >= 10
    for cls in plain:
        back = pickle.loads(pickle.dumps(cls("what went wrong")))
        assert type(back) is cls
        assert str(back) == "what went wrong"


def test_checks_failed_keeps_its_click_behaviour() -> None:
    from benchmax.cli._exit_codes import ChecksFailed

    @click.command()
    def check() -> None:
        raise ChecksFailed("2 checks failed")

    result = click.testing.CliRunner().invoke(check, [])
    assert result.exit_code == 1
    assert "Error: 2 checks failed" in result.output
    assert isinstance(ChecksFailed("x"), CLIError)
