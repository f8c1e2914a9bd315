"""``benchmax run`` in-process: mock and real endpoints, targets, errors, resume, secrets."""

from __future__ import annotations

import fcntl
import hashlib
import json
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import Result
from tests.cli.conftest import SAMPLE_ENVS, sample_envs_importable

from benchmax.cli._output_paths import free_path
from benchmax.testing import Fault

ANSWER_ENV = f"{SAMPLE_ENVS}:AnswerEnv"


def source_digest(path: Path) -> str:
    return "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()[:16]


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def one_line_error(result: Result) -> str:
    assert result.exit_code != 0, result.output
    text = result.output.strip()
    assert len(text.splitlines()) == 1, text
    assert text.startswith("Error: ")
    return text


@pytest.mark.parametrize("command", [[], ["run"], ["bundle"], ["inspect"], ["mock-serve"]])
def test_help_everywhere(invoke: Callable[..., Result], command: list[str]) -> None:
    result = invoke(*command, "--help")
    assert result.exit_code == 0
    assert "Usage:" in result.output


def test_run_help_lists_every_option(invoke: Callable[..., Result]) -> None:
    text = invoke("run", "--help").output
    for option in (
        "--split", "--data", "--env-arg", "--model", "--base-url", "--api-key-env", "--auth",
        "-n, --max-examples", "-k, --group-size", "--concurrency", "-o, --output", "--force",
        "--model-timeout", "--mock-policy", "--json", "--temperature", "--top-p",
        "--max-tokens", "--seed", "--sampling-arg", "--model-retries", "--tool-timeout",
        "--rollout-timeout", "--reward-timeout", "--no-model-check", "--tokens",
    ):  # fmt: skip
        assert option in text, option


def test_run_options_have_the_documented_defaults() -> None:
    from benchmax.cli import cli

    command = cli.commands["run"]
    values = command.make_context("run", [ANSWER_ENV]).params
    assert values == {
        "target": ANSWER_ENV,
        "split": "eval",
        "data_dir": Path("."),
        "env_arg_pairs": (),
        "model": None,
        "base_url": None,
        "api_key_env": None,
        "auth_pairs": (),
        "max_examples": None,
        "group_size": 4,
        "concurrency": 8,
        "output": None,  # then runs/<env>-<timestamp>.jsonl
        "force": False,
        "temperature": None,
        "top_p": None,
        "max_tokens": None,
        "seed": None,
        "sampling_arg_pairs": (),
        "tokens": False,  # --tokens (issue 17): exact tokens only on request
        "model_timeout": None,
        "model_retries": None,
        "tool_timeout": None,
        "rollout_timeout": None,
        "reward_timeout": None,
        "no_model_check": False,
        "no_judge_check": False,  # beyond.md §9: judges are reached once before the run
        "max_failure_share": 0.8,
        "fail_on_error": 0.1,
        "retry_failed": False,
        "mock_policy": "echo",
        "use_ray": False,  # --ray (issue 13): groups run in this process by default
        "ray_address": None,
        "ray_workers": None,
        "ray_worker_concurrency": 4,
        "as_json": False,
    }
    options = {param.name: set(param.opts) for param in command.params}
    assert options["max_examples"] == {"-n", "--max-examples"}  # show's --limit counts rollouts
    assert options["group_size"] == {"-k", "--group-size"}
    assert options["output"] == {"-o", "--output"}


def test_run_on_the_mock_model(
    invoke: Callable[..., Result], answer_data: Path, tmp_path: Path
) -> None:
    output = tmp_path / "run.jsonl"
    result = invoke("run", ANSWER_ENV, "--data", answer_data, "-k", "2", "-o", output)
    assert result.exit_code == 0, result.output
    assert "mock model" in result.output and "not a real model" in result.output
    assert "termination reasons" in result.output and "finished" in result.output
    assert "correct" in result.output
    records = lines(output)
    definition = records[0]["definition"]
    limits = definition.pop("limits")  # BaseEnv's limits as the environment has them
    assert limits["max_turns"] == 1 and limits["model_timeout"] is None
    assert definition == {
        "env": {"class": "sample_envs:AnswerEnv"},
        "env_source": {"sample_envs": source_digest(SAMPLE_ENVS)},
        "split": "eval",
        "model": "mock-model",
        "base_url": "@mock",
        "group_size": 2,
        "max_examples": None,
        "mock_policy": "echo",
    }
    assert len(records) == 1 + 12
    # echo repeats the question, which is the answer for even rows
    assert {r["example_index"]: r["rewards"]["correct"] for r in records[1:]} == {
        i: float(i % 2 == 0) for i in range(6)
    }
    assert (tmp_path / "run.report.json").exists()


def test_default_output_is_under_runs(
    invoke: Callable[..., Result],
    answer_data: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    result = invoke("run", ANSWER_ENV, "--data", answer_data, "-n", "1", "-k", "1")
    assert result.exit_code == 0, result.output
    [written] = (tmp_path / "runs").glob("AnswerEnv-*.jsonl")
    assert len(lines(written)) == 2


def test_package_file_target_is_imported_under_its_module_name(
    invoke: Callable[..., Result], answer_data: Path, tmp_path: Path
) -> None:
    package = tmp_path / "mypkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "envmod.py").write_text(
        "from sample_envs import AnswerEnv\n\nclass PackagedEnv(AnswerEnv):\n    pass\n"
    )
    sample_envs_importable()
    output = tmp_path / "out.jsonl"
    result = invoke(
        "run", f"{package}/envmod.py:PackagedEnv", "--data", answer_data, "-n", "1", "-o", output
    )
    assert result.exit_code == 0, result.output
    assert lines(output)[0]["definition"]["env"]["class"] == "mypkg.envmod:PackagedEnv"


def test_module_target_and_split_and_env_args(
    invoke: Callable[..., Result], tmp_path: Path
) -> None:
    output = tmp_path / "out.jsonl"
    result = invoke(
        "run", "tests.runner.sample_envs:NumberEnv", "--split", "train", "--env-arg", "count=3",
        "--env-arg", "delay=0", "-k", "2", "-o", output,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    records = lines(output)
    assert records[0]["definition"]["env"] == {
        "class": "tests.runner.sample_envs:NumberEnv",
        "constructor_args": {"count": 3, "delay": 0},
    }
    assert records[0]["definition"]["split"] == "train"
    assert len(records) == 1 + 6


def test_resume_and_mismatch_through_the_cli(
    invoke: Callable[..., Result], answer_data: Path, tmp_path: Path
) -> None:
    output = tmp_path / "out.jsonl"
    first = invoke("run", ANSWER_ENV, "--data", answer_data, "-n", "2", "-k", "2", "-o", output)
    assert first.exit_code == 0, first.output
    again = invoke("run", ANSWER_ENV, "--data", answer_data, "-n", "2", "-k", "2", "-o", output)
    assert again.exit_code == 0 and "(2 resumed)" in again.output
    extended = invoke("run", ANSWER_ENV, "--data", answer_data, "-n", "4", "-k", "2", "-o", output)
    assert extended.exit_code == 0 and "(2 resumed)" in extended.output, extended.output
    assert len(lines(output)) == 1 + 8
    refused = invoke("run", ANSWER_ENV, "--data", answer_data, "-n", "3", "-k", "2", "-o", output)
    assert "max_examples was 4, now 3" in one_line_error(refused)
    forced = invoke(
        "run", ANSWER_ENV, "--data", answer_data, "-n", "3", "-k", "2", "-o", output, "--force"
    )
    assert forced.exit_code == 0, forced.output
    assert len(lines(output)) == 1 + 8


def test_editing_a_sibling_module_of_a_lone_env_file_is_a_change(
    invoke: Callable[..., Result], answer_data: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "lone_cli"
    folder.mkdir()
    (folder / "lone_cli_env.py").write_text(
        "import lone_cli_scoring\nfrom sample_envs import AnswerEnv\n\n"
        "class WeightedEnv(AnswerEnv):\n"
        "    async def compute_reward(self, rollout):\n"
        "        rewards = await super().compute_reward(rollout)\n"
        "        return {k: v * lone_cli_scoring.weight() for k, v in rewards.items()}\n"
    )
    (folder / "lone_cli_scoring.py").write_text("def weight():\n    return 1.0\n")
    sample_envs_importable()
    output = tmp_path / "out.jsonl"
    args = ("run", f"{folder}/lone_cli_env.py:WeightedEnv", "--data", answer_data, "-n", "1")
    assert invoke(*args, "-o", output).exit_code == 0
    assert set(lines(output)[0]["definition"]["env_source"]) == {
        "lone_cli_env", "lone_cli_scoring",
    }  # fmt: skip
    again = invoke(*args, "-o", output)
    assert again.exit_code == 0 and "(1 resumed)" in again.output
    (folder / "lone_cli_scoring.py").write_text("def weight():\n    return 2.0\n")
    refused = invoke(*args, "-o", output)
    assert "the environment's source changed: lone_cli_scoring (edited)" in one_line_error(refused)


def test_env_arg_mock_substitution(invoke: Callable[..., Result], tmp_path: Path) -> None:
    target = tmp_path / "urlenv.py"
    target.write_text(
        "from sample_envs import NumberEnv\n\n"
        "class UrlEnv(NumberEnv):\n"
        "    def __init__(self, urls):\n"
        "        super().__init__(1)\n"
        "        assert urls['judge'].startswith('http://127.0.0.1:'), urls\n"
        "        assert urls['judge'].endswith('/v1'), urls\n"
    )
    sample_envs_importable()
    output = tmp_path / "out.jsonl"
    result = invoke("run", f"{target}:UrlEnv", "--env-arg", 'urls={"judge": "@mock"}', "-o", output)
    assert result.exit_code == 0, result.output
    definition = lines(output)[0]["definition"]
    assert definition["env"]["constructor_args"] == {"urls": {"judge": "@mock"}}


def test_model_timeout_reaches_base_env(
    invoke: Callable[..., Result], answer_data: Path, tmp_path: Path
) -> None:
    policy = tmp_path / "slow.py"
    policy.write_text(
        "import asyncio\n\nasync def slow(body):\n    await asyncio.sleep(2)\n    return 'late'\n"
    )
    output = tmp_path / "out.jsonl"
    result = invoke(
        "run", ANSWER_ENV, "--data", answer_data, "-n", "1", "-k", "1", "--model-timeout", "0.2",
        "--mock-policy", f"{policy}:slow", "-o", output,
    )  # fmt: skip
    assert result.exit_code == 1, result.output  # beyond.md §9: every rollout failed
    assert "Error: every rollout failed (" in result.output
    assert lines(output)[1]["termination_reason"] == "model_timeout"


def test_real_endpoint_with_keys_from_variables(
    invoke: Callable[..., Result], answer_data: Path, tmp_path: Path, threaded_server
) -> None:
    output = tmp_path / "out.jsonl"
    with threaded_server(model="served-model") as server:
        result = invoke(
            "run", ANSWER_ENV, "--data", answer_data, "-n", "2", "-k", "2",
            "--base-url", server.base_url, "--model", "served-model",
            "--api-key-env", "MY_MODEL_KEY", "-o", output,
            env={"MY_MODEL_KEY": "sk-very-secret-value"},
        )  # fmt: skip
        requests = server.requests
    assert result.exit_code == 0, result.output
    assert "mock model" not in result.output
    chat = [r for r in requests if r.path.endswith("/chat/completions")]
    assert len(chat) == 4
    assert {r.headers.get("authorization") for r in chat} == {"Bearer sk-very-secret-value"}
    assert {r.body["model"] for r in chat} == {"served-model"}
    written = output.read_text() + (tmp_path / "out.report.json").read_text()
    assert "sk-very-secret-value" not in written + result.output
    assert lines(output)[0]["definition"]["base_url"] == server.base_url


def test_a_secret_given_as_a_sampling_arg_is_masked_in_everything_the_run_writes(
    invoke: Callable[..., Result], answer_data: Path, tmp_path: Path, threaded_server
) -> None:
    secret = "sk-very-secret-value"
    output = tmp_path / "out.jsonl"
    args = [
        "run", ANSWER_ENV, "--data", answer_data, "-n", "2", "-k", "1", "--model", "m",
        "--api-key-env", "MY_MODEL_KEY", "--sampling-arg", f"user={secret}",
        "--sampling-arg", f'metadata={{"k": "{secret}"}}', "-o", output,
    ]  # fmt: skip
    with threaded_server(model="m") as server:
        result = invoke(*args, "--base-url", server.base_url, env={"MY_MODEL_KEY": secret})
        assert result.exit_code == 0, result.output
        header = lines(output)[0]
        assert header["definition"]["sampling_args"]["user"] == "***"
        assert header["definition"]["sampling_args"]["metadata"] == {"k": "***"}
        rerun = invoke(
            *args, "-n", "3", "--force", "--base-url", server.base_url,
            env={"MY_MODEL_KEY": secret},
        )  # fmt: skip
    assert invoke("view", output, "-o", tmp_path / "page.html").exit_code == 0
    shown = invoke("show", output)
    assert rerun.exit_code == 0, rerun.output  # a forced rewrite of the header, masked too
    assert len(lines(output)[0]["previous_definitions"]) == 1
    written = "".join(p.read_text(errors="replace") for p in tmp_path.rglob("*") if p.is_file())
    assert secret not in written + result.output + shown.output + rerun.output


def test_a_password_in_the_base_url_with_a_key_variable_is_said_once_before_the_run(
    invoke: Callable[..., Result], answer_data: Path, tmp_path: Path
) -> None:
    output = tmp_path / "out.jsonl"
    result = invoke(
        "run", ANSWER_ENV, "--data", answer_data, "--model", "m", "-o", output,
        "--base-url", "http://user:pa55word-in-url@127.0.0.1:9/v1",
        "--api-key-env", "MY_MODEL_KEY", env={"MY_MODEL_KEY": "sk-some-key-value"},
    )  # fmt: skip
    message = one_line_error(result)
    assert "--base-url carries a password and --api-key-env" in message
    assert "pa55word-in-url" not in message and not output.exists()


def test_missing_data_file_names_its_path(invoke: Callable[..., Result], tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    message = one_line_error(invoke("run", ANSWER_ENV, "--data", empty, "-o", tmp_path / "o.jsonl"))
    assert "data file not found" in message and str(empty / "eval.jsonl") in message


@pytest.mark.parametrize(
    ("option", "value", "named"),
    [
        ("--api-key-env", "sk-live-Zq81xPastedKey0042", "--api-key-env"),
        ("--auth", "judge=sk-live-Zq81xPastedKey0042", "--auth judge"),
    ],
)
def test_a_key_pasted_where_its_variable_name_belongs_is_not_repeated(
    invoke: Callable[..., Result], tmp_path: Path, option: str, value: str, named: str
) -> None:
    """``--api-key-env sk-...`` used to answer "names environment variable sk-..., which is
    not set": the key, printed to the terminal or a CI log."""
    result = invoke(
        "run", ANSWER_ENV, "--base-url", "http://127.0.0.1:9/v1", "--model", "m",
        option, value, "-o", tmp_path / "o.jsonl",
    )  # fmt: skip
    assert result.exit_code == 3
    assert one_line_error(result) == (
        f"Error: {named} takes the name of the environment variable holding the key (e.g. "
        "OPENAI_API_KEY), not the key itself: the 26 characters given are not a variable "
        "name (not repeated here, in case they are the key)"
    )
    assert "Zq81xPastedKey" not in result.output


def test_an_empty_data_file_is_a_configuration_error(
    invoke: Callable[..., Result], tmp_path: Path
) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "eval.jsonl").write_text("")
    result = invoke("run", ANSWER_ENV, "--data", data, "-o", tmp_path / "o.jsonl")
    assert result.exit_code == 3
    assert one_line_error(result) == (
        f"Error: the eval split from {data} has no examples: "
        "AnswerEnv.create_dataset returned an empty dataset"
    )
    assert not (tmp_path / "o.jsonl").exists()


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["no/such/file.py:Env"], "no such file"),
        ([f"{SAMPLE_ENVS}:Missing"], "has no 'Missing'"),
        ([f"{SAMPLE_ENVS}:write_answer_data"], "is not an Environment subclass"),
        ([str(SAMPLE_ENVS)], "must name a class"),
        (["not.a.module.anywhere:Env"], "cannot import 'not.a.module.anywhere'"),
        ([ANSWER_ENV, "--env-arg", "novalue"], "invalid --env-arg 'novalue'"),
        ([ANSWER_ENV, "--env-arg", "=1"], "invalid --env-arg '=1'"),
        ([ANSWER_ENV, "--env-arg", "bogus=1"], "cannot construct AnswerEnv"),
        ([ANSWER_ENV, "--auth", "judge"], "invalid --auth 'judge'"),
        ([ANSWER_ENV, "--data", "/no/such/dir"], "data directory not found"),
        ([ANSWER_ENV, "--data", str(SAMPLE_ENVS)], f"--data {SAMPLE_ENVS} is a file, not"),
        ([ANSWER_ENV, "--mock-policy", "nomodule_xyz:f"], "cannot import"),
        ([ANSWER_ENV, "--base-url", "http://127.0.0.1:9/v1"], "--model is required"),
        (
            [ANSWER_ENV, "--base-url", "http://127.0.0.1:9/v1", "--model", "m",
             "--env-arg", "x=@mock"],
            "'@mock' in --env-arg needs the embedded mock",
        ),
        (
            [ANSWER_ENV, "--base-url", "http://127.0.0.1:9/v1", "--model", "m",
             "--api-key-env", "BENCHMAX_TEST_UNSET_VARIABLE"],
            "BENCHMAX_TEST_UNSET_VARIABLE, which is not set",
        ),
        (
            [ANSWER_ENV, "--api-key-env", "HOME"],
            "--api-key-env needs --base-url (the embedded mock model takes no key)",
        ),
        (
            ["tests.runner.sample_envs:NumberEnv", "--model-timeout", "1"],
            "--model-timeout applies to BaseEnv environments only",
        ),
        (
            [ANSWER_ENV, "--base-url", "http://127.0.0.1:9/v1", "--model", "m",
             "--mock-policy", "echo"],
            "--mock-policy needs the embedded mock (omit --base-url)",
        ),
        ([ANSWER_ENV, "--model", " "], "model must be a non-empty string"),
        ([ANSWER_ENV, "--base-url", "http://127.0.0.1:9/v1", "--model", " "], "model must be"),
        ([ANSWER_ENV, "--base-url", "", "--model", "m"], "--base-url must be a URL such as"),
        ([ANSWER_ENV, "--base-url", "http://exa mple/v1", "--model", "m"], "cannot reach"),
    ],
)  # fmt: skip
def test_errors_are_one_line(
    invoke: Callable[..., Result], tmp_path: Path, args: list[str], expected: str
) -> None:
    assert expected in one_line_error(invoke("run", *args, "-o", tmp_path / "o.jsonl"))


def test_unreachable_endpoint(invoke: Callable[..., Result], tmp_path: Path) -> None:
    message = one_line_error(
        invoke("run", ANSWER_ENV, "--base-url", "http://127.0.0.1:9/v1", "--model", "m")
    )
    assert "cannot reach the model endpoint http://127.0.0.1:9/v1" in message


def test_unreadable_bundle(invoke: Callable[..., Result], tmp_path: Path) -> None:
    garbage = tmp_path / "env.bundle"
    garbage.write_bytes(b"not a zip file at all")
    assert "cannot load bundle" in one_line_error(invoke("run", garbage))
    assert "bundle file not found" in one_line_error(invoke("run", tmp_path / "missing.bundle"))


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["run", ANSWER_ENV, "-k", "0"], "Invalid value for '-k' / '--group-size'"),
        (["run", "--grup", "1", ANSWER_ENV], "No such option '--grup'"),
        (["run"], "Missing argument 'TARGET'"),
        (["run", ANSWER_ENV, "--split", "test"], "Invalid value for '--split'"),
        (["run", ANSWER_ENV, "--model-timeout", "inf"], "'inf' is not a finite number of"),
        (["run", ANSWER_ENV, "--reward-timeout", "nan"], "'nan' is not a finite number of"),
        (["run", ANSWER_ENV, "--tool-timeout", "1e999"], "Invalid value for '--tool-timeout'"),
        (["run", ANSWER_ENV, "--rollout-timeout", "-inf"], "'--rollout-timeout'"),
        (["run", ANSWER_ENV, "-n", "1" + "0" * 30], "Invalid value for '-n'"),
        (["nope"], "No such command 'nope'"),
    ],
)
def test_usage_errors_are_one_line_too(
    invoke: Callable[..., Result], args: list[str], expected: str
) -> None:
    result = invoke(*args)
    assert result.exit_code == 2
    message = one_line_error(result)
    assert expected in message and "--help')" in message


def test_multi_line_messages_become_one_line(invoke: Callable[..., Result], tmp_path: Path) -> None:
    target = tmp_path / "multiline_env.py"
    target.write_text(
        "from sample_envs import NumberEnv\n\n"
        "class LoudEnv(NumberEnv):\n"
        "    def __init__(self):\n"
        "        raise ValueError('first line\\n   second line')\n"
    )
    sample_envs_importable()
    message = one_line_error(invoke("run", f"{target}:LoudEnv", "-o", tmp_path / "o.jsonl"))
    assert "cannot construct LoudEnv: ValueError: first line second line" in message


def test_rows_the_environment_cannot_read_are_one_line(
    invoke: Callable[..., Result], tmp_path: Path
) -> None:
    (tmp_path / "eval.jsonl").write_text('{"prompt": "no question field"}\n')
    message = one_line_error(invoke("run", ANSWER_ENV, "--data", tmp_path))
    assert f"cannot load the eval split from {tmp_path}: KeyError: 'question'" in message


def test_a_password_in_the_base_url_is_never_shown(invoke: Callable[..., Result]) -> None:
    message = one_line_error(
        invoke(
            "run", ANSWER_ENV, "--base-url", "http://me:pw-secret-1@127.0.0.1:9/v1", "--model", "m"
        )
    )
    assert "cannot reach the model endpoint http://me:***@127.0.0.1:9/v1" in message
    assert "pw-secret-1" not in message


def test_a_key_echoed_by_the_endpoint_is_masked_everywhere(
    invoke: Callable[..., Result], answer_data: Path, tmp_path: Path, threaded_server
) -> None:
    key = "sk-proj-4f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c"

    def reject(body: dict) -> Fault:
        return Fault.status(401, message=f"Incorrect API key provided: {key}")

    output = tmp_path / "out.jsonl"
    with threaded_server(reject) as server:
        result = invoke(
            "run", ANSWER_ENV, "--data", answer_data, "-n", "2", "-k", "2",
            "--base-url", server.base_url, "--model", "m", "--api-key-env", "LEAKY_KEY",
            "-o", output, env={"LEAKY_KEY": key},
        )  # fmt: skip
        seen = {r.headers.get("authorization") for r in server.requests if r.body}
    assert result.exit_code == 1, result.output  # beyond.md §9: every rollout failed
    assert "Error: every rollout failed (" in result.output
    assert seen == {f"Bearer {key}"}  # the key was really used
    results = output.read_text()
    assert "Incorrect API key provided: ***" in results  # the echoed key was masked in logs
    assert "model_error, e.g. rollout" in result.output and "provided: ***" in result.output
    everything = results + (tmp_path / "out.report.json").read_text() + result.output
    assert key not in everything


def test_the_failure_example_shows_the_error_that_ended_the_rollout(
    invoke: Callable[..., Result], answer_data: Path, tmp_path: Path
) -> None:
    # not the hook note ("benchmax: raised by ...") the traceback ends with, nor the last line
    # of another exception logged earlier in the rollout
    target = f"{Path(__file__).with_name('refusing_tools_env.py')}:RefusingToolsEnv"
    output = tmp_path / "o.jsonl"
    result = invoke("run", target, "--data", answer_data, "-n", "1", "-k", "1", "-o", output)
    assert result.exit_code == 1, result.output
    [line] = [line for line in result.output.splitlines() if ", e.g. rollout" in line]
    assert line.startswith("  tool_error, e.g. rollout ")
    # the exception's line, then the hook its note names and where the user's code raised
    assert line.endswith(
        ": ConnectionRefusedError: sandbox service refused the session"
        " (raised by RefusingToolsEnv.tools at refusing_tools_env.py:23 in rollout_context)"
    ), line
    assert "benchmax: raised by" not in line and "For further information" not in line
    logged = output.read_text()
    assert "benchmax: raised by RefusingToolsEnv.tools" in logged  # the note the line skips
    assert "For further information visit x" in logged


def test_the_failure_share_stop_names_the_error_that_ended_the_rollouts(
    invoke: Callable[..., Result], answer_data: Path, tmp_path: Path
) -> None:
    target = f"{Path(__file__).with_name('refusing_tools_env.py')}:RefusingToolsEnv"
    result = invoke("run", target, "--data", answer_data, "-k", "4", "-o", tmp_path / "o.jsonl")
    assert result.exit_code == 3, result.output
    [line] = [line for line in result.output.splitlines() if line.startswith("Error: stopped")]
    assert line == "Error: stopped early: 20 of 20 rollouts (100%) ended tool_error"
    example = result.output.splitlines()[-3]
    assert example.startswith("  e.g. rollout ")
    assert ": ConnectionRefusedError: sandbox service refused the session (raised by" in example
    assert "For further information" not in example and "benchmax: raised by" not in example


def test_progress_bar_and_failure_reasons_are_shown(
    invoke: Callable[..., Result], answer_data: Path, tmp_path: Path
) -> None:
    result = invoke("run", ANSWER_ENV, "--data", answer_data, "-k", "2", "-o", tmp_path / "o.jsonl")
    assert result.exit_code == 0, result.output
    [bar] = [line for line in result.output.splitlines() if line.startswith("running")]
    assert "6/6 examples" in bar and "rollouts/s" in bar and "mean correct 0.500" in bar
    assert ", e.g. rollout" not in result.output  # every rollout finished


def test_default_output_never_reuses_an_existing_file(tmp_path: Path) -> None:
    assert free_path(tmp_path, "Env-1", ".jsonl") == tmp_path / "Env-1.jsonl"
    (tmp_path / "Env-1.jsonl").write_text("")
    (tmp_path / "Env-1-2.jsonl").write_text("")
    assert free_path(tmp_path, "Env-1", ".jsonl") == tmp_path / "Env-1-3.jsonl"


def test_a_results_file_in_use_is_refused(
    invoke: Callable[..., Result], answer_data: Path, tmp_path: Path
) -> None:
    output = tmp_path / "busy.jsonl"
    with output.open("ab") as held:
        fcntl.flock(held.fileno(), fcntl.LOCK_EX)
        message = one_line_error(invoke("run", ANSWER_ENV, "--data", answer_data, "-o", output))
    assert f"{output} is in use by another run" in message


def test_bare_benchmax_shows_the_help(invoke: Callable[..., Result]) -> None:
    result = invoke()
    assert "Commands:" in result.output and "mock-serve" in result.output
    assert "Error" not in result.output


def test_a_key_in_an_error_message_is_masked(
    invoke: Callable[..., Result], tmp_path: Path, threaded_server
) -> None:
    target = tmp_path / "keyed_env.py"
    target.write_text(
        "import os\n\nfrom sample_envs import NumberEnv\n\n"
        "class KeyedEnv(NumberEnv):\n"
        "    def __init__(self):\n"
        "        raise ValueError('rejected key ' + os.environ['KEYED_VARIABLE'])\n"
    )
    sample_envs_importable()
    with threaded_server() as server:
        result = invoke(
            "run", f"{target}:KeyedEnv", "--base-url", server.base_url, "--model", "m",
            "--api-key-env", "KEYED_VARIABLE", "-o", tmp_path / "o.jsonl",
            env={"KEYED_VARIABLE": "sk-live-0123456789abcdef"},
        )  # fmt: skip
    message = one_line_error(result)
    assert "cannot construct KeyedEnv: ValueError: rejected key ***" in message
    assert "sk-live-0123456789abcdef" not in message


def test_a_run_refused_before_it_starts_prints_only_its_error(
    invoke: Callable[..., Result], tmp_path: Path
) -> None:
    """No progress bar (nor the blank line it leaves) before the one ``Error:`` line."""
    (tmp_path / "eval.jsonl").write_text('{"prompt": "2+2?", "ground_truth": "4"}\n{bad\n')
    result = invoke(
        "run", "examples/quickstart/env.py:QuickStartEnv", "--data", tmp_path,
        "--mock-policy", "examples/quickstart/policy.py:reply", "-o", tmp_path / "o.jsonl",
    )  # fmt: skip
    assert result.exit_code == 3
    assert result.output.startswith("Error: cannot load the eval split"), repr(result.output)
    assert "eval.jsonl:2" in result.output
