"""``validate_environment``: every check an environment should pass before a training run."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import logging
import sys
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from benchmax._value_checks import is_non_empty_str
from benchmax.auth import ModelAuth, StaticBearerAuth, bind_model_auth
from benchmax.envs.base import BaseEnv
from benchmax.envs.environment import Environment
from benchmax.envs.shared_types import DatasetSplit, Example, RolloutOutcome, RolloutRequest
from benchmax.testing import MockModelServer, echo
from benchmax.validation._bundle_check import check_bundle
from benchmax.validation._config import MOCK_URL_MARKER, ValidationConfig
from benchmax.validation._imports import local_source_modules, undeclared_imports
from benchmax.validation._report import CheckResult, CheckStatus, ValidationReport
from benchmax.validation._shapes import prompt_message_problems, tool_problems

__all__ = ["validate_environment"]

_SPLITS: tuple[DatasetSplit, ...] = ("train", "eval")
_MAX_LISTED = 3
_OPERATIONAL_FAILURES = frozenset(
    {
        "model_error",
        "model_timeout",
        "tool_error",
        "tool_timeout",
        "rollout_timeout",
        "reward_error",
        "reward_timeout",
        "group_reward_error",
        "judge_error",
        "content_filter",
    }
)
MOCK_KEY = "benchmax-validate-placeholder"


def _error_text(error: BaseException) -> str:
    notes = " ".join(getattr(error, "__notes__", ()))
    text = f"{type(error).__name__}: {error}"
    return f"{text} ({notes})" if notes else text


def _listed(items: Sequence[str]) -> str:
    shown = "; ".join(items[:_MAX_LISTED])
    more = len(items) - _MAX_LISTED
    return f"{shown}; and {more} more" if more > 0 else shown


class _Records(logging.Handler):
    """Keeps the warnings and errors logged while validating (reasons for failed rollouts)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def errors_since(self, start: int) -> list[str]:
        return [
            " ".join(r.getMessage().split())
            for r in self.records[start:]
            if r.levelno >= logging.ERROR
        ]


@contextlib.contextmanager
def _capturing_logs() -> Iterator[_Records]:
    handler = _Records()
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        yield handler
    finally:
        root.removeHandler(handler)


def _substitute_mock(value: Any, url: str) -> Any:
    if isinstance(value, str):
        return url if value == MOCK_URL_MARKER else value
    if isinstance(value, list):
        return [_substitute_mock(item, url) for item in value]
    if isinstance(value, dict):
        return {key: _substitute_mock(item, url) for key, item in value.items()}
    return value


@dataclass
class _Split:
    name: DatasetSplit
    examples: list[Example[Any]]


@dataclass
class _Validation:
    """The checks of one validation, in the order they ran."""

    env_class: type[Environment[Any, Any]]
    config: ValidationConfig
    mock: MockModelServer
    logs: _Records
    checks: list[CheckResult] = field(default_factory=list)

    def add(self, name: str, status: CheckStatus, detail: str = "") -> CheckResult:
        for secret in self._secrets():
            detail = detail.replace(secret, "***")
        check = CheckResult(name=name, status=status, detail=detail)
        self.checks.append(check)
        return check

    def _secrets(self) -> list[str]:
        """Credentials that must never appear in a check's detail."""
        config = self.config
        auths = [config.model_auth, *config.auth_providers.values()]
        found = [auth.token for auth in auths if isinstance(auth, StaticBearerAuth)]
        with contextlib.suppress(ValueError):
            found.append(urlsplit(config.base_url or "").password or "")
        return [secret for secret in found if secret]

    @property
    def constructor_args(self) -> dict[str, Any]:
        return _substitute_mock(dict(self.config.constructor_args), self.mock.base_url)

    # -- the environment ---------------------------------------------------------------------

    def check_class(self) -> bool:
        cls = self.env_class
        if not isinstance(cls, type) or not issubclass(cls, Environment):
            self.add(
                "environment class",
                "failed",
                f"{cls!r} is not an Environment subclass: subclass benchmax.envs.BaseEnv "
                "(or Environment for a custom loop)",
            )
            return False
        abstract = sorted(getattr(cls, "__abstractmethods__", ()))
        if abstract:
            self.add(
                "environment class",
                "failed",
                f"{cls.__name__} leaves abstract members unimplemented: {', '.join(abstract)}; "
                "define them on the class",
            )
            return False
        kind = "a BaseEnv" if issubclass(cls, BaseEnv) else "an Environment"
        self.add("environment class", "passed", f"{cls.__module__}:{cls.__qualname__} is {kind}")
        return True

    def construct(self) -> Environment[Any, Any] | None:
        args = self.constructor_args
        try:
            inspect.signature(self.env_class).bind(**args)
        except TypeError as error:
            self.add(
                "constructor",
                "failed",
                f"the constructor does not accept these arguments ({error}); pass each "
                "required one as --env-arg KEY=VALUE (constructor_args) and drop unknown ones",
            )
            return None
        except ValueError:
            pass  # no introspectable signature: let the call decide
        try:
            env = self.env_class(**args)
        except Exception as error:
            self.add(
                "constructor",
                "failed",
                f"{self.env_class.__name__}(**{sorted(args)}) raised {_error_text(error)}; "
                "fix the arguments or the constructor",
            )
            return None
        shown = ", ".join(sorted(args)) or "no arguments"
        self.add("constructor", "passed", f"constructed with {shown}")
        return env

    def check_reward_keys(self, env: Environment[Any, Any]) -> tuple[str, ...] | None:
        advice = (
            "declare the complete, ordered reward shape on the class, "
            "e.g. reward_keys = ('correct',)"
        )
        try:
            keys = env.reward_keys
        except Exception as error:
            self.add("reward_keys", "failed", f"reading reward_keys raised {_error_text(error)}")
            return None
        problem = None
        if isinstance(keys, str | bytes) or not isinstance(keys, Sequence):
            problem = f"reward_keys is a {type(keys).__name__}, not a sequence of strings"
        elif not keys:
            problem = "reward_keys is empty"
        elif not all(is_non_empty_str(key) for key in keys):
            problem = "reward_keys holds a value that is not a non-empty string"
        elif len(set(keys)) != len(keys):
            problem = "reward_keys repeats a key"
        if problem is not None:
            self.add("reward_keys", "failed", f"{problem}: {advice}")
            return None
        self.add("reward_keys", "passed", ", ".join(keys))
        return tuple(keys)

    # -- datasets ----------------------------------------------------------------------------

    async def _load(self, env: Environment[Any, Any], split: DatasetSplit) -> list[Example[Any]]:
        dataset = await env.create_dataset(split, self.config.base_dir)
        examples = list(dataset)
        for index, example in enumerate(examples):
            if not isinstance(example, Example):
                raise TypeError(
                    f"item {index} of the dataset is a {type(example).__name__}, not an Example"
                )
        return examples

    async def check_split(self, env: Environment[Any, Any], split: DatasetSplit) -> _Split | None:
        name = f"dataset {split}"
        try:
            examples = await self._load(env, split)
        except FileNotFoundError as error:
            self.add(name, "skipped", f"no {split} data: {error.filename or error}")
            return None
        except Exception as error:
            self.add(
                f"{name}: loads",
                "failed",
                f"create_dataset({split!r}, {self.config.base_dir}) raised {_error_text(error)}",
            )
            return None
        if not examples:
            self.add(
                f"{name}: loads",
                "failed",
                f"the {split} split is empty: add examples to it or remove its file",
            )
            return None
        self.add(f"{name}: loads", "passed", f"{len(examples)} examples")
        ids = [example.id for example in examples]
        repeated = sorted(i for i, n in Counter(ids).items() if n > 1)
        if repeated:
            self.add(
                f"{name}: ids unique",
                "failed",
                f"{len(repeated)} ids repeat ({_listed(repeated)}): derive each id from "
                "the example's content, e.g. canonical_example_id(payload), and drop duplicates",
            )
        else:
            self.add(f"{name}: ids unique", "passed", f"{len(ids)} distinct ids")
        await self._check_stable(env, split, ids)
        self._check_json(split, examples)
        if isinstance(env, BaseEnv):
            self._check_prompts(split, examples)
        return _Split(split, examples)

    async def _check_stable(
        self, env: Environment[Any, Any], split: DatasetSplit, ids: list[str]
    ) -> None:
        name = f"dataset {split}: ids stable"
        try:
            again = [example.id for example in await self._load(env, split)]
        except Exception as error:
            self.add(name, "failed", f"loading the split again raised {_error_text(error)}")
            return
        if again == ids:
            self.add(name, "passed", "a second load gives the same ids in the same order")
            return
        first = next(
            (i for i, (a, b) in enumerate(zip(ids, again, strict=False)) if a != b),
            min(len(ids), len(again)),
        )
        self.add(
            name,
            "failed",
            f"a second load differs from example {first} on ({len(ids)} vs {len(again)} "
            "examples): ids must not depend on randomness, time or iteration order; derive "
            "them from content (canonical_example_id) and keep the order fixed",
        )

    def _check_json(self, split: DatasetSplit, examples: list[Example[Any]]) -> None:
        bad: list[str] = []
        for index, example in enumerate(examples):
            try:
                json.dumps(example.payload, allow_nan=False)
            except (TypeError, ValueError) as error:
                bad.append(f"example {index} ({example.id}): {error}")
        if bad:
            self.add(
                f"dataset {split}: payloads JSON",
                "failed",
                f"{len(bad)} payloads are not JSON-serializable ({_listed(bad)}): keep payloads "
                "to dicts, lists, strings, finite numbers, booleans and null",
            )
        else:
            self.add(f"dataset {split}: payloads JSON", "passed", "every payload serializes")

    def _check_prompts(self, split: DatasetSplit, examples: list[Example[Any]]) -> None:
        bad: list[str] = []
        for index, example in enumerate(examples):
            problems = prompt_message_problems(example.payload)
            if problems:
                bad.append(f"example {index}: {problems[0]}")
        if bad:
            self.add(
                f"dataset {split}: prompt_messages",
                "failed",
                f"{len(bad)} examples have malformed prompt_messages ({_listed(bad)})",
            )
        else:
            self.add(
                f"dataset {split}: prompt_messages",
                "passed",
                "every example has well-formed chat messages",
            )

    # -- tools and rollouts ------------------------------------------------------------------

    async def check_tools(self, env: Environment[Any, Any]) -> None:
        if not isinstance(env, BaseEnv):
            self.add("tools", "skipped", "not a BaseEnv: tools are the environment's own affair")
            return
        try:
            tools = await env.list_tools()
        except Exception as error:
            self.add("tools", "failed", f"list_tools() raised {_error_text(error)}")
            return
        problems = tool_problems(tools)
        if problems:
            self.add("tools", "failed", _listed(problems))
        else:
            names = [tool["function"]["name"] for tool in tools]
            self.add("tools", "passed", f"{len(names)} tools: {', '.join(names) or 'none'}")

    def _providers(self) -> dict[str, ModelAuth]:
        return dict(self.config.auth_providers)

    def _request(self, rollout_id: str, example: Example[Any], split: DatasetSplit) -> Any:
        config = self.config
        if config.uses_mock:
            base_url = self.mock.session_url(rollout_id)
            auth: ModelAuth = StaticBearerAuth(MOCK_KEY)
        else:
            assert config.base_url is not None
            base_url = config.base_url.replace("{rollout_id}", rollout_id)
            auth = config.model_auth
        return RolloutRequest(
            rollout_id=rollout_id,
            example=example,
            model=config.model,
            base_url=base_url,
            model_auth=auth,
            split=split,
        )

    async def check_rollouts(
        self, env: Environment[Any, Any], split: _Split, keys: tuple[str, ...]
    ) -> None:
        config = self.config
        where = "the embedded mock model" if config.uses_mock else config.base_url
        chosen = split.examples[: config.examples]
        groups: list[list[RolloutOutcome]] = []
        start = len(self.logs.records)
        try:
            async with asyncio.timeout(config.rollout_timeout):
                with bind_model_auth(self._providers()):
                    for index, example in enumerate(chosen):
                        requests = [
                            self._request(f"validate.e{index}.r{k}", example, split.name)
                            for k in range(config.group_size)
                        ]
                        outcomes = await env.run_group(requests)
                        groups.append([outcomes[r.rollout_id] for r in requests])
        except TimeoutError:
            self.add(
                "rollouts",
                "failed",
                f"the rollouts did not finish within {config.rollout_timeout:g} s against "
                f"{where}: check the endpoint, or set model_timeout/rollout_timeout on the env",
            )
            return
        except Exception as error:
            self.add(
                "rollouts",
                "failed",
                f"run_group raised {_error_text(error)}: a contract error (reward shape, "
                "payload or hook result); fix the environment code it names",
            )
            return
        outcomes = [outcome for group in groups for outcome in group]
        wrong = [o for o in outcomes if tuple(o.rewards) != keys and set(o.rewards) != set(keys)]
        if wrong:
            self.add(
                "rollouts",
                "failed",
                f"rewards {sorted(wrong[0].rewards)} differ from reward_keys {list(keys)}",
            )
            return
        reasons = Counter(outcome.termination_reason for outcome in outcomes)
        failed = sum(n for reason, n in reasons.items() if reason in _OPERATIONAL_FAILURES)
        summary = ", ".join(f"{n} {reason}" for reason, n in sorted(reasons.items()))
        ran = f"{len(chosen)} examples x {config.group_size} rollouts against {where} ({summary})"
        errors = self.logs.errors_since(start)
        why = f"; first error: {errors[0][:400]}" if errors else ""
        if failed == len(outcomes):
            self.add("rollouts", "failed", f"every rollout failed: {ran}{why}")
            return
        if failed:
            self.add("rollouts", "warning", f"some rollouts failed: {ran}{why}")
        else:
            self.add("rollouts", "passed", ran)
        self._check_variance(groups)

    def _check_variance(self, groups: list[list[RolloutOutcome]]) -> None:
        if self.config.group_size < 2:
            self.add("reward variance", "skipped", "groups of one rollout cannot vary")
            return
        varied = sum(
            1 for group in groups if len({tuple(sorted(o.rewards.items())) for o in group}) > 1
        )
        if varied:
            self.add(
                "reward variance", "passed", f"rewards vary in {varied} of {len(groups)} groups"
            )
            return
        hint = (
            " (expected with the mock's echo policy: pass --mock-policy with a policy that "
            "answers like a model, or a real --base-url)"
            if self.config.uses_mock and self.config.policy is None
            else ""
        )
        self.add(
            "reward variance",
            "warning",
            f"every group's rollouts got identical rewards: a flat group carries no learning "
            f"signal for group-relative training{hint}",
        )

    # -- bundle and dependencies -------------------------------------------------------------

    def check_dependencies(self) -> None:
        module = sys.modules.get(self.env_class.__module__)
        if module is None:
            self.add("dependencies", "skipped", "the environment's module is not loaded")
            return
        modules = [*local_source_modules(module), *self.config.local_modules]
        missing = undeclared_imports(modules, self.config.pip_dependencies)
        if not missing:
            declared = ", ".join(self.config.pip_dependencies) or "none needed"
            self.add("dependencies", "passed", f"third-party imports declared ({declared})")
            return
        items = [
            f"{m.module} imports {m.imported} (distribution {m.distribution})" for m in missing
        ]
        specs = " ".join(f"--pip-dependency '{_suggested(m.distribution)}'" for m in missing)
        self.add(
            "dependencies",
            "warning",
            f"{_listed(items)}: not declared, so it will be missing where the bundle runs; "
            f"declare it with {specs} (pip_dependencies)",
        )


def _suggested(distribution: str) -> str:
    import importlib.metadata

    try:
        return f"{distribution}>={importlib.metadata.version(distribution)}"
    except importlib.metadata.PackageNotFoundError:
        return distribution


async def validate_environment(
    env_class: type[Environment[Any, Any]],
    config: ValidationConfig | None = None,
    *,
    target: str | None = None,
) -> ValidationReport:
    """Run every check on ``env_class`` and return the report (never raises for a bad env).

    Checks, in order: the class is a concrete ``Environment``; the constructor accepts
    ``config.constructor_args``; ``reward_keys`` is declared; for each split present
    (``train``, ``eval``): the dataset loads and is non-empty, ids are unique and identical
    across two loads, payloads are JSON-serializable, and BaseEnv payloads have valid
    ``prompt_messages``; ``list_tools`` gives valid OpenAI function schemas; ``examples``
    groups of ``group_size`` rollouts run without a contract error with the declared keys;
    rewards vary within a group (a warning otherwise); the bundle dumps, survives a file
    round trip, is compatible, and runs one rollout in a fresh interpreter; its size; and
    third-party imports of the environment's source are declared (a warning otherwise).
    Later checks that need an earlier result are skipped when it failed.
    """
    config = config or ValidationConfig()
    label = (
        target
        or f"{getattr(env_class, '__module__', '?')}:{getattr(env_class, '__qualname__', '?')}"
    )
    with _capturing_logs() as logs:
        async with MockModelServer(config.policy or echo, record=False) as mock:
            validation = _Validation(env_class, config, mock, logs)
            await _run_checks(validation)
    return ValidationReport.of(label, validation.checks)


async def _run_checks(validation: _Validation) -> None:
    if not validation.check_class():
        return
    env = validation.construct()
    if env is None:
        validation.add("datasets", "skipped", "needs a constructed environment")
        return
    try:
        keys = validation.check_reward_keys(env)
        splits = [s for name in _SPLITS if (s := await validation.check_split(env, name))]
        if not splits and not any(c.name.endswith(": loads") for c in validation.checks):
            validation.add(
                "datasets",
                "failed",
                f"neither train nor eval loads from {validation.config.base_dir}: put the "
                "data files there (e.g. train.jsonl, eval.jsonl) or point --data at them",
            )
        await validation.check_tools(env)
        if keys is None or not splits:
            validation.add("rollouts", "skipped", "needs reward_keys and a split that loads")
        else:
            rollout_split = next((s for s in splits if s.name == "eval"), splits[0])
            await validation.check_rollouts(env, rollout_split, keys)
    finally:
        with contextlib.suppress(Exception):
            await env.aclose()
    split_name = splits[0].name if splits else None
    bundle_split = "eval" if any(s.name == "eval" for s in splits) else split_name
    await check_bundle(validation, bundle_split)
    validation.check_dependencies()
