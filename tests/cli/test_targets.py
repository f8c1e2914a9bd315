"""Command-line value parsing: env args, @mock, file imports, injected credential names."""

from __future__ import annotations

from pathlib import Path

import click
import pytest

from benchmax.auth import InjectedAuth, StaticBearerAuth
from benchmax.cli._credentials import auth_variables, injected_auth_names
from benchmax.cli._targets import (
    TargetError,
    import_file,
    import_object,
    parse_env_args,
    substitute_mock,
    uses_mock,
)
from benchmax.rewards import Judge


def test_env_args_parse_as_json_then_fall_back_to_strings() -> None:
    assert parse_env_args(
        ["n=3", "s=hello", "l=[1, 2]", "b=true", 'q="3"', "empty=", "url=http://h:1/v1", "eq=a=b"]
    ) == {
        "n": 3,
        "s": "hello",
        "l": [1, 2],
        "b": True,
        "q": "3",
        "empty": "",
        "url": "http://h:1/v1",
        "eq": "a=b",
    }


def test_non_json_constants_stay_strings() -> None:
    assert parse_env_args(["a=NaN", "b=Infinity", "c=-Infinity", "d=[NaN]"]) == {
        "a": "NaN",
        "b": "Infinity",
        "c": "-Infinity",
        "d": "[NaN]",
    }


@pytest.mark.parametrize("pair", ["novalue", "=1", "1x=2", "a-b=1", " =3"])
def test_malformed_env_args(pair: str) -> None:
    with pytest.raises(click.UsageError, match="invalid --env-arg"):
        parse_env_args([pair])


def test_auth_pairs() -> None:
    assert auth_variables(["judge=JUDGE_KEY", " grader = KEY2 "]) == {
        "judge": "JUDGE_KEY",
        "grader": "KEY2",
    }
    for bad in ["judge", "=VAR", "judge="]:
        with pytest.raises(click.UsageError, match="invalid --auth"):
            auth_variables([bad])


def test_mock_marker_is_substituted_everywhere() -> None:
    value = {"a": "@mock", "b": ["@mock", "x"], "c": {"d": "@mock"}, "e": 1, "f": "@mockery"}
    assert substitute_mock(value, "http://m/v1") == {
        "a": "http://m/v1",
        "b": ["http://m/v1", "x"],
        "c": {"d": "http://m/v1"},
        "e": 1,
        "f": "@mockery",
    }
    assert uses_mock(value) and not uses_mock({"f": "@mockery"})
    assert uses_mock([{"deep": ["@mock"]}])
    assert not uses_mock({"obj": _Incomparable(), "n": 1})


class _Incomparable:
    """Bundled constructor arguments can be any object, even one that refuses ``==``."""

    def __eq__(self, other: object) -> bool:
        raise TypeError("no comparisons")

    __hash__ = object.__hash__


def test_import_file_uses_the_module_name_and_replaces_a_stale_one(tmp_path: Path) -> None:
    first, second = tmp_path / "one", tmp_path / "two"
    for directory, value in ((first, 1), (second, 2)):
        directory.mkdir()
        (directory / "samename_env.py").write_text(f"VALUE = {value}\n")
    assert import_file(first / "samename_env.py").VALUE == 1
    module = import_file(second / "samename_env.py")
    assert module.__name__ == "samename_env" and module.VALUE == 2


def test_import_file_errors(tmp_path: Path) -> None:
    with pytest.raises(TargetError, match="no such file"):
        import_file(tmp_path / "absent.py")
    (tmp_path / "broken_env_mod.py").write_text("raise RuntimeError('boom')\n")
    with pytest.raises(TargetError, match="RuntimeError: boom"):
        import_file(tmp_path / "broken_env_mod.py")


MISNAMED_ENV = """
from benchmax.envs import BaseEnv


class ConvertEnv(BaseEnv):
    reward_keys = ("correct",)

    async def create_dataset(self, split, base_dir, *, max_examples=None):
        raise NotImplementedError


def helper():
    pass
"""


def test_a_missing_name_in_a_file_names_the_file_and_its_environment_classes(
    tmp_path: Path,
) -> None:
    """It said "env has no 'Nope'": the module name, which for a file target is only its
    stem, and no hint when no name is close."""
    env_file = tmp_path / "misnamed_env.py"
    env_file.write_text(MISNAMED_ENV)
    with pytest.raises(TargetError) as caught:
        import_object(f"{env_file}:Nope", "target")
    assert str(caught.value) == f"{env_file} has no 'Nope'; environment classes in it: ConvertEnv"
    with pytest.raises(TargetError) as caught:
        import_object(f"{env_file}:ConvertEnvv", "target")
    assert str(caught.value) == f"{env_file} has no 'ConvertEnvv' (did you mean 'ConvertEnv'?)"
    with pytest.raises(TargetError) as caught:  # a policy: no environment classes listed
        import_object(f"{env_file}:reply", "policy")
    assert str(caught.value) == f"{env_file} has no 'reply'"
    with pytest.raises(TargetError) as caught:  # a module target keeps its dotted name
        import_object("benchmax.envs:Nope", "target")
    assert str(caught.value) == "benchmax.envs has no 'Nope'"


class _Holder:
    shared = InjectedAuth("from-class")

    def __init__(self) -> None:
        self.judge = Judge(model="j", base_url="http://j/v1", auth=InjectedAuth("judge"))
        self.more = {"graders": [InjectedAuth("grader")], "static": StaticBearerAuth("k")}


def test_injected_auth_names_are_found_in_attributes_containers_and_classes() -> None:
    assert injected_auth_names(_Holder()) == {"from-class", "judge", "grader"}
    assert injected_auth_names(object()) == set()
