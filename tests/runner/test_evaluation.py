"""Evaluating a model: sampling args, token usage, pass@k, and a resume that notices edits."""

from __future__ import annotations

import hashlib
import importlib
import json
import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from tests.runner.sample_envs import AnswerEnv, NumberEnv, number_config, write_answer_data

from benchmax._observer import RolloutReport, report_rollout
from benchmax.envs import (
    BaseEnv,
    Dataset,
    DatasetSplit,
    Environment,
    Example,
    RolloutAttempt,
    RolloutRequest,
)
from benchmax.results import PassAtK, UsageStats, read_results
from benchmax.runner import ResumeMismatchError, RunConfig, run_environment
from benchmax.runner._definition import env_source_digests
from benchmax.testing import MockModelServer


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def digest_of(path: Path | str) -> str:
    return "sha256:" + hashlib.sha256(Path(path).read_bytes()).hexdigest()[:16]


class TableEnv(Environment[dict[str, Any], RolloutAttempt]):
    """Rewards from the payload: ``{"rows": [{"reason", "solved", "usage"}, ...]}`` per rollout.

    ``solved`` (0/1) and ``score`` (0.75 * solved: not pass/fail) are the reward keys.
    Each rollout reports its ``usage`` through the runner's observer, as BaseEnv does.
    """

    reward_keys = ("solved", "score")

    def __init__(self, groups: Sequence[Sequence[Mapping[str, Any]]]) -> None:
        self.groups = groups
        self.seen: list[Mapping[str, Any]] = []

    async def create_dataset(
        self, split: DatasetSplit, base_dir: Path, *, max_examples: int | None = None
    ) -> Dataset[dict[str, Any]]:
        examples = [
            Example(id=f"ex-{i}", payload={"rows": list(rows)})
            for i, rows in enumerate(self.groups)
        ]
        return Dataset(examples[:max_examples])

    async def run_rollout(self, request: RolloutRequest[dict[str, Any]]) -> RolloutAttempt:
        self.seen.append(request.sampling_args)
        k = int(request.rollout_id.rpartition(".r")[2])
        row = request.example.payload["rows"][k]
        reason = row.get("reason", "finished")
        report_rollout(
            RolloutReport(
                rollout_id=request.rollout_id,
                example_id=request.example.id,
                termination_reason=reason,
                rewards={},
                messages=(),
                timings={"model_seconds": 0.0, "tool_seconds": 0.0, "reward_seconds": 0.0},
                usage=row.get("usage"),
            )
        )
        solved = float(row.get("solved", 0))
        return RolloutAttempt(
            rollout_id=request.rollout_id,
            termination_reason=reason,
            rewards={"solved": solved, "score": 0.75 * solved},
        )


def table_config(tmp_path: Path, group_size: int, **changes: Any) -> RunConfig:
    return number_config(tmp_path, group_size=group_size, **changes)


# -- sampling args -----------------------------------------------------------------------------


async def test_run_sampling_args_reach_every_request(tmp_path: Path) -> None:
    env = TableEnv([[{}, {}], [{}, {}]])
    args = {"temperature": 0.7, "top_k": 20, "chat_template_kwargs": {"enable_thinking": False}}
    await run_environment(env, table_config(tmp_path, 2, sampling_args=args))
    assert env.seen == [args] * 4
    assert lines(tmp_path / "results.jsonl")[0]["definition"]["sampling_args"] == args


async def test_no_sampling_args_leave_requests_and_header_as_before(tmp_path: Path) -> None:
    env = TableEnv([[{}]])
    await run_environment(env, table_config(tmp_path, 1))
    assert env.seen == [{}]
    assert "sampling_args" not in lines(tmp_path / "results.jsonl")[0]["definition"]


async def test_header_records_env_sampling_args_merged_under_the_runs(tmp_path: Path) -> None:
    class TunedEnv(TableEnv):
        sampling_args = {"temperature": 0.1, "top_k": 5}

    config = table_config(tmp_path, 1, sampling_args={"temperature": 0.9})
    await run_environment(TunedEnv([[{}]]), config)
    definition = lines(tmp_path / "results.jsonl")[0]["definition"]
    assert definition["sampling_args"] == {"temperature": 0.9, "top_k": 5}


async def test_resume_with_other_sampling_args_is_refused(tmp_path: Path) -> None:
    await run_environment(TableEnv([[{}]]), table_config(tmp_path, 1))
    with pytest.raises(ResumeMismatchError, match=r'sampling_args was null, now \{"seed": 1\}'):
        await run_environment(
            TableEnv([[{}]]), table_config(tmp_path, 1, sampling_args={"seed": 1})
        )
    other = tmp_path / "other.jsonl"
    await run_environment(
        TableEnv([[{}]]), table_config(tmp_path, 1, output=other, sampling_args={"seed": 1})
    )
    with pytest.raises(
        ResumeMismatchError, match=r'sampling_args was \{"seed": 1\}, now \{"seed": 2\}'
    ):
        await run_environment(
            TableEnv([[{}]]), table_config(tmp_path, 1, output=other, sampling_args={"seed": 2})
        )


@pytest.mark.parametrize(
    ("value", "error", "match"),
    [
        ({"model": "x"}, ValueError, "must not set 'model'"),
        ({"messages": []}, ValueError, "must not set 'messages'"),
        ({"tools": []}, ValueError, "must not set 'tools'"),
        ({"stream": True}, ValueError, "must not set 'stream' to true"),
        ({"n": 2}, ValueError, r"sampling_args\['n'\] must be 1, got 2: .* group_size=N"),
        ({"n": True}, ValueError, r"sampling_args\['n'\] must be 1, got True"),
        ({"temperature": float("nan")}, ValueError, r"sampling_args\['temperature'\] must be JSON"),
        ({"stop": object()}, ValueError, r"sampling_args\['stop'\] must be JSON"),
        ({"": 1}, TypeError, "keys must be non-empty strings"),
        ([("temperature", 1)], TypeError, "must be a mapping"),
    ],
)
def test_run_config_validates_sampling_args(value: Any, error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        RunConfig(model="m", base_url="http://x.invalid/v1", sampling_args=value)


def test_run_config_refuses_constructor_args_that_are_not_a_mapping() -> None:
    with pytest.raises(TypeError, match="constructor_args must be a mapping"):
        RunConfig(model="m", base_url="http://x.invalid/v1", constructor_args=[1])  # type: ignore[arg-type]


@pytest.mark.skipif(
    not hasattr(BaseEnv, "sampling_args"),
    reason="BaseEnv merges sampling args into the body once helper 'replies' is merged",
)
async def test_sampling_args_arrive_in_the_request_bodies(tmp_path: Path) -> None:
    write_answer_data(tmp_path, count=2)
    args = {"temperature": 0.5, "max_tokens": 64, "seed": 7, "top_k": 20}
    async with MockModelServer() as server:
        config = RunConfig(
            model="mock-model",
            base_url=server.base_url,
            base_dir=tmp_path,
            group_size=2,
            sampling_args=args,
        )
        await run_environment(AnswerEnv(), config)
        bodies = [r.body for r in server.requests if r.path.endswith("/chat/completions")]
    assert len(bodies) == 4
    for body in bodies:
        assert list(body)[:2] == ["model", "messages"]
        assert {key: body[key] for key in args} == args


# -- token usage -------------------------------------------------------------------------------

USAGE_GROUPS = [
    [
        {"solved": 1, "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}},
        {
            "usage": {"prompt_tokens": 10, "completion_tokens": 40, "total_tokens": 50},
            "reason": "output_exceeded",
        },
    ],
    [
        {"usage": {"prompt_tokens": 12, "completion_tokens": 3, "reasoning_tokens": 2}},
        {"reason": "model_error"},  # the server reported no usage
    ],
]  # fmt: skip


async def test_usage_is_recorded_per_rollout_and_summed_in_the_report(tmp_path: Path) -> None:
    report = await run_environment(TableEnv(USAGE_GROUPS), table_config(tmp_path, 2))
    usages = [r["usage"] for r in lines(tmp_path / "results.jsonl")[1:]]
    assert usages == [row.get("usage") for group in USAGE_GROUPS for row in group]
    assert report.usage == UsageStats(
        rollouts=3,
        prompt_tokens=32,
        completion_tokens=48,
        total_tokens=65,
        reasoning_tokens=2,
        cached_tokens=None,
        completion_tokens_mean=16.0,
        completion_tokens_max=40,
    )
    assert report.output_exceeded_share == 0.25
    written = json.loads(report.report_path.read_text())  # type: ignore[union-attr]
    assert written["usage"]["completion_tokens_max"] == 40
    assert written["usage"]["cached_tokens"] is None
    assert written["output_exceeded_share"] == 0.25


async def test_usage_survives_resume(tmp_path: Path) -> None:
    first = await run_environment(TableEnv(USAGE_GROUPS), table_config(tmp_path, 2))
    again = await run_environment(TableEnv(USAGE_GROUPS), table_config(tmp_path, 2))
    assert again.groups_resumed == 2 and again.rollouts_run == 0
    assert again.usage == first.usage
    assert again.pass_at_k == first.pass_at_k


async def test_results_written_before_usage_existed_report_no_usage(tmp_path: Path) -> None:
    await run_environment(TableEnv(USAGE_GROUPS), table_config(tmp_path, 2))
    path = tmp_path / "results.jsonl"
    records = lines(path)
    for record in records[1:]:
        del record["usage"]
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    report = await run_environment(TableEnv(USAGE_GROUPS), table_config(tmp_path, 2))
    assert report.groups_resumed == 2
    assert report.usage is None
    assert report.output_exceeded_share == 0.25
    assert all(r.usage is None for r in read_results(path).rollouts)


async def test_no_usage_reported_at_all_gives_none(tmp_path: Path) -> None:
    report = await run_environment(TableEnv([[{}, {}]]), table_config(tmp_path, 2))
    assert [r["usage"] for r in lines(tmp_path / "results.jsonl")[1:]] == [None, None]
    assert report.usage is None
    assert json.loads(report.report_path.read_text())["usage"] is None  # type: ignore[union-attr]


# -- pass@k ------------------------------------------------------------------------------------


def solved_groups(*patterns: str) -> list[list[dict[str, Any]]]:
    return [[{"solved": int(c)} for c in pattern] for pattern in patterns]


async def test_pass_at_k_against_hand_computed_values(tmp_path: Path) -> None:
    # n = 4 per group; c = 0, 1, 2.  pass@1 = mean(0, 1/4, 2/4) = 1/4.
    # pass@4 = mean(0, 1, 1) = 2/3 (any success among all 4).
    report = await run_environment(
        TableEnv(solved_groups("0000", "0100", "1010")), table_config(tmp_path, 4)
    )
    metrics = report.pass_at_k["solved"]
    assert metrics.k == 4
    assert metrics.pass_at_1 == pytest.approx(0.25)
    assert metrics.pass_at_k == pytest.approx(2 / 3)
    assert metrics.any_success_share == pytest.approx(2 / 3)
    assert "score" not in report.pass_at_k  # 0 / 0.75 is not a pass/fail reward
    written = json.loads(report.report_path.read_text())  # type: ignore[union-attr]
    assert written["pass_at_k"]["solved"]["pass_at_1"] == pytest.approx(0.25)
    assert written["pass_at_k"]["solved"]["k"] == 4


async def test_pass_at_k_with_groups_of_five(tmp_path: Path) -> None:
    # n = 5: c = 2 -> pass@5 = 1; c = 0 -> 0.  pass@1 = mean(2/5, 0) = 0.2.
    report = await run_environment(
        TableEnv(solved_groups("11000", "00000")), table_config(tmp_path, 5)
    )
    assert report.pass_at_k["solved"] == PassAtK(
        k=5, pass_at_1=pytest.approx(0.2), pass_at_k=1 / 2, any_success_share=1 / 2
    )


async def test_pass_at_k_of_number_env_hits(tmp_path: Path) -> None:
    # NumberEnv: exactly one of the 3 rollouts of each group hits -> pass@1 1/3, pass@3 1.
    report = await run_environment(NumberEnv(5), number_config(tmp_path))
    hit = report.pass_at_k["hit"]
    assert (hit.k, hit.pass_at_1, hit.pass_at_k, hit.any_success_share) == (
        3,
        pytest.approx(1 / 3),
        1.0,
        1.0,
    )
    assert "value" not in report.pass_at_k  # values 0..4


# -- the run definition records the environment's source ---------------------------------------

ENV_SOURCE = """\
import edit_helper_mod
from benchmax.envs import Dataset, Environment, Example, RolloutAttempt


class EditEnv(Environment):
    reward_keys = ("bonus",)

    async def create_dataset(self, split, base_dir, *, max_examples=None):
        return Dataset([Example(id="ex-0", payload={})])

    async def run_rollout(self, request):
        return RolloutAttempt(
            rollout_id=request.rollout_id,
            termination_reason="finished",
            rewards={"bonus": edit_helper_mod.bonus()},
        )
"""


@pytest.fixture
def edit_project(tmp_path: Path) -> Iterator[Path]:
    """A project (``pyproject.toml``) with an env module that uses a helper module."""
    project = tmp_path / "proj"
    project.mkdir()
    (project / "pyproject.toml").write_text('[project]\nname = "proj"\nversion = "0"\n')
    (project / "edit_env_mod.py").write_text(ENV_SOURCE)
    (project / "edit_helper_mod.py").write_text("def bonus():\n    return 1.0\n")
    sys.path.insert(0, str(project))
    importlib.invalidate_caches()
    try:
        yield project
    finally:
        sys.path.remove(str(project))
        for name in ("edit_env_mod", "edit_helper_mod"):
            sys.modules.pop(name, None)


def edit_env() -> Environment[Any, Any]:
    return importlib.import_module("edit_env_mod").EditEnv()


async def test_header_records_a_digest_of_every_captured_module(
    edit_project: Path, tmp_path: Path
) -> None:
    await run_environment(edit_env(), number_config(tmp_path, group_size=1))
    definition = lines(tmp_path / "results.jsonl")[0]["definition"]
    assert definition["env_source"] == {
        "edit_env_mod": digest_of(edit_project / "edit_env_mod.py"),
        "edit_helper_mod": digest_of(edit_project / "edit_helper_mod.py"),
    }


async def test_resume_after_editing_a_captured_module_is_refused_naming_it(
    edit_project: Path, tmp_path: Path
) -> None:
    config = number_config(tmp_path, group_size=1)
    await run_environment(edit_env(), config)
    helper = edit_project / "edit_helper_mod.py"
    helper.write_text(helper.read_text() + "# tuned\n")
    with pytest.raises(ResumeMismatchError) as caught:
        await run_environment(edit_env(), config)
    message = str(caught.value)
    assert "the environment's source changed: edit_helper_mod (edited)" in message
    assert "edit_env_mod" not in message
    assert "--force" in message


async def test_force_resumes_after_an_edit_and_keeps_the_old_definition(
    edit_project: Path, tmp_path: Path
) -> None:
    config = number_config(tmp_path, group_size=1)
    await run_environment(edit_env(), config)
    before = digest_of(edit_project / "edit_env_mod.py")
    (edit_project / "edit_env_mod.py").write_text(ENV_SOURCE + "# edited\n")
    report = await run_environment(edit_env(), number_config(tmp_path, group_size=1, force=True))
    assert report.groups_resumed == 1
    header = lines(tmp_path / "results.jsonl")[0]
    assert header["previous_definitions"][0]["env_source"]["edit_env_mod"] == before
    assert header["definition"]["env_source"]["edit_env_mod"] != before


async def test_unchanged_source_resumes(edit_project: Path, tmp_path: Path) -> None:
    config = number_config(tmp_path, group_size=1)
    await run_environment(edit_env(), config)
    report = await run_environment(edit_env(), config)
    assert report.groups_resumed == 1 and report.rollouts_run == 0


async def test_a_new_local_module_is_named_as_new(edit_project: Path, tmp_path: Path) -> None:
    config = number_config(tmp_path, group_size=1)
    await run_environment(edit_env(), config)
    path = tmp_path / "results.jsonl"
    records = lines(path)
    del records[0]["definition"]["env_source"]["edit_helper_mod"]
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    with pytest.raises(ResumeMismatchError, match=r"source changed: edit_helper_mod \(new\)"):
        await run_environment(edit_env(), config)


async def test_headers_without_a_source_digest_still_resume(tmp_path: Path) -> None:
    config = number_config(tmp_path)
    await run_environment(NumberEnv(2), config)
    path = tmp_path / "results.jsonl"
    records = lines(path)
    del records[0]["definition"]["env_source"]  # as written before digests existed
    records[0]["definition"]["env"]["constructor_args"] = {}  # as the CLI used to write it
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    report = await run_environment(NumberEnv(2), config)
    assert report.groups_resumed == 2


async def test_a_bundle_definition_takes_no_source_digest(tmp_path: Path) -> None:
    config = number_config(tmp_path, env_definition={"bundle_digest": "sha256:abc"})
    await run_environment(NumberEnv(1), config)
    definition = lines(tmp_path / "results.jsonl")[0]["definition"]
    assert definition["env"] == {"bundle_digest": "sha256:abc"}
    assert "env_source" not in definition


def test_a_class_that_cannot_be_pickled_has_no_source_digest() -> None:
    import threading

    class Locked(NumberEnv):
        lock = threading.Lock()

    assert env_source_digests(Locked) is None


def test_a_module_outside_any_project_is_digested(tmp_path: Path) -> None:
    (tmp_path / "lonely_env_mod.py").write_text(
        "from tests.runner.sample_envs import NumberEnv\n\nclass LonelyEnv(NumberEnv):\n    pass\n"
    )
    sys.path.insert(0, str(tmp_path))
    try:
        module = importlib.import_module("lonely_env_mod")
        digests = env_source_digests(module.LonelyEnv)
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("lonely_env_mod", None)
    assert digests is not None
    assert digests["lonely_env_mod"] == digest_of(tmp_path / "lonely_env_mod.py")


SIBLING_ENV = """\
import lone_helpers
from lone_scoring import bonus
from benchmax.envs import Dataset, Environment, Example, RolloutAttempt


class SiblingEnv(Environment):
    reward_keys = ("bonus",)

    async def create_dataset(self, split, base_dir, *, max_examples=None):
        return Dataset([Example(id="ex-0", payload={})])

    async def run_rollout(self, request):
        return RolloutAttempt(
            rollout_id=request.rollout_id,
            termination_reason="finished",
            rewards={"bonus": bonus() + lone_helpers.extra()},
        )
"""
SIBLING_MODULES = ("lone_sibling_env", "lone_helpers", "lone_scoring", "lone_deeper", "lone_unused")


@pytest.fixture
def lone_directory(tmp_path: Path) -> Iterator[Path]:
    """A directory with no project file: an env module and the sibling modules it imports."""
    folder = tmp_path / "lone"
    folder.mkdir()
    (folder / "lone_sibling_env.py").write_text(SIBLING_ENV)
    (folder / "lone_helpers.py").write_text("import lone_deeper\n\ndef extra():\n    return 0.0\n")
    (folder / "lone_scoring.py").write_text("def bonus():\n    return 1.0\n")
    (folder / "lone_deeper.py").write_text("LEVEL = 2\n")
    (folder / "lone_unused.py").write_text("UNUSED = 1\n")
    sys.path.insert(0, str(folder))
    importlib.invalidate_caches()
    try:
        yield folder
    finally:
        sys.path.remove(str(folder))
        for name in SIBLING_MODULES:
            sys.modules.pop(name, None)


def sibling_env() -> Environment[Any, Any]:
    importlib.import_module("lone_unused")  # loaded, but the env module does not import it
    return importlib.import_module("lone_sibling_env").SiblingEnv()


def test_sibling_modules_the_env_imports_are_digested(lone_directory: Path) -> None:
    digests = env_source_digests(type(sibling_env()))
    assert digests == {
        name: digest_of(lone_directory / f"{name}.py")
        for name in ("lone_deeper", "lone_helpers", "lone_scoring", "lone_sibling_env")
    }
    assert list(digests) == sorted(digests)  # deterministic order


async def test_editing_a_sibling_module_refuses_the_resume_naming_it(
    lone_directory: Path, tmp_path: Path
) -> None:
    config = number_config(tmp_path, group_size=1)
    await run_environment(sibling_env(), config)
    scoring = lone_directory / "lone_scoring.py"
    scoring.write_text(scoring.read_text() + "# tuned\n")
    with pytest.raises(ResumeMismatchError, match=r"source changed: lone_scoring \(edited\)\)"):
        await run_environment(sibling_env(), config)
    (lone_directory / "lone_unused.py").write_text("UNUSED = 2\n")  # not imported: no change
    report = await run_environment(sibling_env(), number_config(tmp_path, group_size=1, force=True))
    assert report.groups_resumed == 1
    assert (await run_environment(sibling_env(), config)).rollouts_run == 0


def test_a_package_s_relative_imports_count_and_installed_code_does_not(tmp_path: Path) -> None:
    package = tmp_path / "lone_pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sub" / "__init__.py").write_text("")
    (package / "common.py").write_text("K = 1\n")
    (package / "sub" / "env.py").write_text(
        "import json\nimport httpx\nimport benchmax.envs\nfrom .. import common\n"
        "from .tools import tool\n"
        "from tests.runner.sample_envs import NumberEnv\n\n\nclass PkgEnv(NumberEnv):\n    pass\n"
    )
    (package / "sub" / "tools.py").write_text("def tool():\n    return 1\n")
    installed = package / ".venv" / "lib" / "site-packages"  # a virtualenv inside the package
    installed.mkdir(parents=True)
    (installed / "lone_installed.py").write_text("X = 1\n")
    env_file = package / "sub" / "env.py"
    env_file.write_text("import lone_installed\n" + env_file.read_text())
    sys.path[:0] = [str(tmp_path), str(installed)]
    try:
        env_class = importlib.import_module("lone_pkg.sub.env").PkgEnv
        digests = env_source_digests(env_class)
    finally:
        sys.path.remove(str(tmp_path))
        sys.path.remove(str(installed))
        sys.modules.pop("lone_installed", None)
        for name in [n for n in sys.modules if n == "lone_pkg" or n.startswith("lone_pkg.")]:
            del sys.modules[name]
    assert digests is not None
    assert set(digests) == {"lone_pkg.sub.env", "lone_pkg.common", "lone_pkg.sub.tools"}
    assert digests["lone_pkg.common"] == digest_of(package / "common.py")


# -- constructor arguments and limits in the definition ----------------------------------------


async def test_constructor_args_and_limits_are_recorded(tmp_path: Path) -> None:
    write_answer_data(tmp_path, count=1)
    env = AnswerEnv(model_timeout=5.0, model_retries=2)
    config = RunConfig(
        model="m",
        base_url="http://127.0.0.1:9/v1",
        base_dir=tmp_path,
        group_size=1,
        output=tmp_path / "r.jsonl",
        constructor_args={"model_timeout": 5.0, "model_retries": 2},
    )
    await run_environment(env, config)
    definition = lines(tmp_path / "r.jsonl")[0]["definition"]
    assert definition["env"]["constructor_args"] == {"model_timeout": 5.0, "model_retries": 2}
    assert definition["limits"]["model_timeout"] == 5.0
    assert definition["limits"]["model_retries"] == 2
    assert definition["limits"]["max_turns"] == 1
    env.model_timeout = 9.0
    with pytest.raises(ResumeMismatchError, match="limits was"):
        await run_environment(env, config)


async def test_environments_without_limits_record_none(tmp_path: Path) -> None:
    await run_environment(NumberEnv(1), number_config(tmp_path))
    assert "limits" not in lines(tmp_path / "results.jsonl")[0]["definition"]


def test_definition_differences_name_modules_and_tolerate_older_headers() -> None:
    from benchmax.results._definition_changes import definition_differences

    old = {"env": {"class": "m:E", "constructor_args": {}}, "env_source": {"a": "1", "b": "2"}}
    new = {"env": {"class": "m:E"}, "env_source": {"a": "1", "c": "3"}, "limits": {"x": 1}}
    assert definition_differences(old, new) == [
        "the environment's source changed: b (gone), c (new)"
    ]
    assert definition_differences({"env": {"class": "m:E"}}, new) == []  # written before
    assert definition_differences({**new, "limits": {"x": 2}}, new) == [
        'limits was {"x": 2}, now {"x": 1}'
    ]
    assert definition_differences({**new, "env_source": None}, new) == [
        'env_source was null, now {"a": "1", "c": "3"}'
    ]


def test_run_config_repr_leaves_out_constructor_args() -> None:
    config = RunConfig(
        model="m", base_url="http://x.invalid/v1", constructor_args={"api_key": "sk-hidden"}
    )
    assert "sk-hidden" not in repr(config)


async def test_taking_the_source_digest_logs_nothing(
    edit_project: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level("DEBUG", logger="benchmax.bundle"):
        await run_environment(edit_env(), number_config(tmp_path, group_size=1))
    assert [r for r in caplog.records if r.name == "benchmax.bundle"] == []
