"""Installed environment names: the ``benchmax.environments`` entry-point group.

Each test installs fake distributions on ``sys.path`` (a ``*.dist-info`` directory with
``entry_points.txt``, which ``importlib.metadata`` reads like any installed package).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import Result
from tests.runner.sample_envs import write_answer_data

from benchmax.cli._targets import (
    ENTRY_POINT_GROUP,
    TargetError,
    load_class_target,
    load_named_target,
    load_target,
)

MODULE = '''
from pathlib import Path

from benchmax.envs import BaseEnv, BaseRollout, Example, JsonlDataset, canonical_example_id


def _example(row):
    prompt = [{"role": "user", "content": row["question"]}]
    payload = {"prompt_messages": prompt, "answer": row["answer"]}
    return Example(id=canonical_example_id(payload), payload=payload)


class NamedAnswerEnv(BaseEnv):
    """Rows {question, answer}; the reply must equal the answer."""

    reward_keys = ("correct",)
    max_turns = 1

    async def create_dataset(self, split, base_dir: Path, *, max_examples=None):
        path = base_dir / f"{split}.jsonl"
        return JsonlDataset(path, row_to_example=_example, max_examples=max_examples)

    async def compute_reward(self, rollout: BaseRollout) -> dict[str, float]:
        reply = rollout.messages[-1]["content"] or ""
        return {"correct": float(reply.strip() == rollout.example_args["answer"])}


NOT_AN_ENV = 42
'''


def install(site: Path, distribution: str, entries: dict[str, str], version: str = "1.0") -> None:
    """A fake installed distribution declaring ``entries`` in the environments group."""
    info = site / f"{distribution}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {distribution}\nVersion: {version}\n"
    )
    lines = [f"[{ENTRY_POINT_GROUP}]", *(f"{name} = {value}" for name, value in entries.items())]
    (info / "entry_points.txt").write_text("\n".join(lines) + "\n")


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    directory = tmp_path / "site"
    directory.mkdir()
    (directory / "named_envs.py").write_text(MODULE)
    monkeypatch.syspath_prepend(str(directory))
    return directory


def test_a_name_resolves_to_the_class_its_entry_point_names(site: Path) -> None:
    install(site, "named-envs", {"answer-env": "named_envs:NamedAnswerEnv"})
    for loader in (load_named_target, load_target, load_class_target):
        target = loader("answer-env")
        assert target.env_class.__name__ == "NamedAnswerEnv"
        assert target.module is not None and target.module.__name__ == "named_envs"


def test_an_unknown_name_lists_the_installed_names(site: Path) -> None:
    install(site, "named-envs", {"answer-env": "named_envs:NamedAnswerEnv"})
    with pytest.raises(TargetError) as raised:
        load_target("answr-env")
    message = str(raised.value)
    assert "'answr-env' is not a file" in message and "answer-env" in message
    assert ENTRY_POINT_GROUP in message and "\n" not in message


def test_a_name_two_packages_declare_differently_is_a_collision(site: Path) -> None:
    install(site, "first-envs", {"answer-env": "named_envs:NamedAnswerEnv"})
    install(site, "second-envs", {"answer-env": "tests.runner.sample_envs:AnswerEnv"}, "2.0")
    with pytest.raises(TargetError) as raised:
        load_target("answer-env")
    message = str(raised.value)
    assert "more than one installed package" in message
    assert "first-envs 1.0: named_envs:NamedAnswerEnv" in message
    assert "second-envs 2.0: tests.runner.sample_envs:AnswerEnv" in message
    assert "\n" not in message


def test_two_packages_naming_the_same_class_do_not_collide(site: Path) -> None:
    install(site, "first-envs", {"answer-env": "named_envs:NamedAnswerEnv"})
    install(site, "second-envs", {"answer-env": "named_envs:NamedAnswerEnv"})
    assert load_target("answer-env").env_class.__name__ == "NamedAnswerEnv"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("missing_module_xyz:Env", "cannot be loaded: ModuleNotFoundError"),
        ("named_envs:Missing", "cannot be loaded: AttributeError"),
        ("named_envs:NOT_AN_ENV", "is not an Environment subclass"),
        ("tests.runner.sample_envs:sample_envs", "cannot be loaded"),
    ],
)
def test_a_broken_entry_point_is_one_line_naming_it(site: Path, value: str, expected: str) -> None:
    install(site, "broken-envs", {"broken": value})
    with pytest.raises(TargetError) as raised:
        load_target("broken")
    message = str(raised.value)
    assert message.startswith(f"environment name 'broken' ({value} from broken-envs 1.0)")
    assert expected in message and "\n" not in message


def test_a_file_of_that_name_wins_and_a_dotted_missing_file_stays_a_bundle_path(
    site: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    install(site, "named-envs", {"answer-env": "named_envs:NamedAnswerEnv"})
    monkeypatch.chdir(tmp_path)
    (tmp_path / "answer-env").write_bytes(b"not a bundle")
    with pytest.raises(TargetError, match="cannot load bundle answer-env"):
        load_target("answer-env")
    with pytest.raises(TargetError, match=r"bundle file not found: missing\.bundle"):
        load_target("missing.bundle")


def test_run_validate_and_bundle_take_a_name(
    site: Path, tmp_path: Path, invoke: Callable[..., Result]
) -> None:
    install(site, "named-envs", {"answer-env": "named_envs:NamedAnswerEnv"})
    data = tmp_path / "data"
    data.mkdir()
    write_answer_data(data, count=3)
    run = invoke("run", "answer-env", "--data", data, "-k", "1", "-o", tmp_path / "r.jsonl")
    assert run.exit_code == 0, run.output
    assert "NamedAnswerEnv" in (tmp_path / "r.jsonl").read_text().splitlines()[0]
    validate = invoke("validate", "answer-env", "--data", data, "--json")
    assert validate.exit_code == 0, validate.output
    bundle = invoke("bundle", "answer-env", "-o", tmp_path / "a.bundle")
    assert bundle.exit_code == 0, bundle.output
    unknown = invoke("run", "no-such-env", "--data", data)
    assert unknown.exit_code != 0
    [line] = unknown.output.strip().splitlines()
    assert line.startswith("Error: 'no-such-env' is not a file")
