"""``benchmax run`` for evaluating a real model: request options, limits, preflight, headers."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from click.testing import Result
from tests.cli.conftest import SAMPLE_ENVS, sample_envs_importable

from benchmax.cli._run_execution import DEFAULT_MODEL_RETRIES
from benchmax.envs import BaseEnv
from benchmax.runner import ResumeMismatchError, RunConfig, run_environment

ANSWER_ENV = f"{SAMPLE_ENVS}:AnswerEnv"
NUMBER_ENV = "tests.runner.sample_envs:NumberEnv"


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def one_line_error(result: Result) -> str:
    assert result.exit_code != 0, result.output
    text = result.output.strip()
    assert len(text.splitlines()) == 1, text
    assert text.startswith("Error: ")
    return text


# -- a tiny endpoint whose /models answers as configured ---------------------------------------


class TinyEndpoint:
    """An HTTP server on 127.0.0.1 answering ``GET /v1/models`` with a fixed status and body
    (everything else: 404), recording the Authorization header of every request."""

    def __init__(self, status: int, body: bytes, content_type: str = "application/json") -> None:
        seen: list[str | None] = []
        self.authorizations = seen

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                seen.append(self.headers.get("Authorization"))
                if self.path == "/v1/models":
                    self._answer(status, body)
                else:
                    self._answer(404, b'{"error": {"message": "not found"}}')

            def do_POST(self) -> None:
                seen.append(self.headers.get("Authorization"))
                length = int(self.headers.get("Content-Length") or 0)
                self.rfile.read(length)
                self._answer(404, b'{"error": {"message": "not found"}}')

            def _answer(self, code: int, payload: bytes) -> None:
                self.send_response(code)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self.base_url = f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def __enter__(self) -> TinyEndpoint:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(60)


@pytest.fixture
def tiny() -> Iterator[Callable[..., TinyEndpoint]]:
    started: list[TinyEndpoint] = []

    def start(status: int, body: bytes, content_type: str = "application/json") -> TinyEndpoint:
        endpoint = TinyEndpoint(status, body, content_type).__enter__()
        started.append(endpoint)
        return endpoint

    yield start
    for endpoint in started:
        endpoint.__exit__()


SECRET = "sk-preflight-secret-123"


@pytest.mark.parametrize("status", [401, 403])
def test_refused_credentials_stop_the_run_at_once(
    invoke: Callable[..., Result], tmp_path: Path, tiny: Callable[..., TinyEndpoint], status: int
) -> None:
    endpoint = tiny(status, b'{"error": {"message": "invalid api key sk-preflight-secret-123"}}')
    output = tmp_path / "o.jsonl"
    result = invoke(
        "run", ANSWER_ENV, "--base-url", endpoint.base_url, "--model", "m",
        "--api-key-env", "PREFLIGHT_KEY", "-o", output, env={"PREFLIGHT_KEY": SECRET},
    )  # fmt: skip
    message = one_line_error(result)
    assert f"refused the credentials (HTTP {status} on GET /models)" in message
    assert SECRET not in result.output
    assert endpoint.authorizations == [f"Bearer {SECRET}"]  # the run's own key, once
    assert not output.exists()


def test_a_model_the_endpoint_does_not_list_is_refused_naming_the_closest(
    invoke: Callable[..., Result], tmp_path: Path, threaded_server
) -> None:
    with threaded_server(model="qwen3-8b-instruct") as server:
        result = invoke(
            "run", ANSWER_ENV, "--base-url", server.base_url, "--model", "qwen3-8b-instrct",
            "-o", tmp_path / "o.jsonl",
        )  # fmt: skip
    message = one_line_error(result)
    assert "model 'qwen3-8b-instrct' is not served by" in message
    assert "closest: qwen3-8b-instruct" in message
    assert "--no-model-check" in message


def test_no_model_check_runs_a_model_the_endpoint_does_not_list(
    invoke: Callable[..., Result], answer_data: Path, tmp_path: Path, threaded_server
) -> None:
    with threaded_server(model="listed") as server:
        result = invoke(
            "run", ANSWER_ENV, "--data", answer_data, "-n", "1", "-k", "1",
            "--base-url", server.base_url, "--model", "unlisted", "--no-model-check",
            "-o", tmp_path / "o.jsonl",
        )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert lines(tmp_path / "o.jsonl")[1]["termination_reason"] == "finished"


@pytest.mark.parametrize(
    ("status", "body", "content_type", "why"),
    [
        (404, b'{"error": {"message": "no such route"}}', "application/json", "(HTTP 404)"),
        (200, b"<html>hello</html>", "text/html", "(not an OpenAI model list)"),
        (200, b'{"models": ["m"]}', "application/json", "(not an OpenAI model list)"),
        (200, b'{"object": "list", "data": []}', "application/json", "(not an OpenAI model list)"),
    ],
)
def test_an_endpoint_without_a_usable_model_list_is_not_an_error(
    invoke: Callable[..., Result],
    answer_data: Path,
    tmp_path: Path,
    tiny: Callable[..., TinyEndpoint],
    status: int,
    body: bytes,
    content_type: str,
    why: str,
) -> None:
    endpoint = tiny(status, body, content_type)
    output = tmp_path / "o.jsonl"
    result = invoke(
        "run", ANSWER_ENV, "--data", answer_data, "-n", "1", "-k", "1",
        "--base-url", endpoint.base_url, "--model", "m", "-o", output,
    )  # fmt: skip
    assert result.exit_code == 1, result.output  # beyond.md §9: every rollout failed
    assert "Error: every rollout failed (" in result.output
    assert f"model check skipped: {endpoint.base_url} has no usable /models {why}" in " ".join(
        result.output.split()
    )
    # the run went ahead (this endpoint has no chat completions: a model error, not a crash)
    assert lines(output)[1]["termination_reason"] == "model_error"


def test_the_preflight_sends_no_credential_without_a_key(
    invoke: Callable[..., Result], tmp_path: Path, tiny: Callable[..., TinyEndpoint]
) -> None:
    endpoint = tiny(401, b"{}")
    message = one_line_error(
        invoke("run", ANSWER_ENV, "--base-url", endpoint.base_url, "--model", "m")
    )
    assert "refused the credentials" in message and "--api-key-env" in message
    assert endpoint.authorizations == [None]


# -- request options ---------------------------------------------------------------------------


def test_sampling_options_are_recorded_in_the_run_definition(
    invoke: Callable[..., Result], answer_data: Path, tmp_path: Path
) -> None:
    output = tmp_path / "o.jsonl"
    result = invoke(
        "run", ANSWER_ENV, "--data", answer_data, "-n", "2", "-k", "1", "-o", output,
        "--temperature", "0.6", "--top-p", "0.95", "--max-tokens", "512", "--seed", "7",
        "--sampling-arg", "top_k=20", "--sampling-arg", "min_p=0.05",
        "--sampling-arg", 'chat_template_kwargs={"enable_thinking": false}',
        "--sampling-arg", "reasoning_effort=low",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    records = lines(output)
    assert records[0]["definition"]["seed"] == 7  # the run seed: one seed per rollout
    assert records[0]["definition"]["sampling_args"] == {
        "temperature": 0.6,
        "top_p": 0.95,
        "max_tokens": 512,
        "top_k": 20,
        "min_p": 0.05,
        "chat_template_kwargs": {"enable_thinking": False},
        "reasoning_effort": "low",
    }
    assert records[0]["definition"]["max_examples"] == 2  # --limit is -n
    assert len(records) == 1 + 2


@pytest.mark.skipif(
    not hasattr(BaseEnv, "sampling_args"),
    reason="BaseEnv merges sampling args into the body once helper 'replies' is merged",
)
def test_sampling_options_arrive_in_the_request_bodies(
    invoke: Callable[..., Result], answer_data: Path, tmp_path: Path, threaded_server
) -> None:
    with threaded_server() as server:
        result = invoke(
            "run", ANSWER_ENV, "--data", answer_data, "-n", "2", "-k", "2",
            "--base-url", server.base_url, "--model", "m", "-o", tmp_path / "o.jsonl",
            "--temperature", "0.6", "--max-tokens", "64", "--sampling-arg", "top_k=20",
        )  # fmt: skip
        bodies = [r.body for r in server.requests if r.path.endswith("/chat/completions")]
    assert result.exit_code == 0, result.output
    assert len(bodies) == 4
    for body in bodies:
        assert (body["temperature"], body["max_tokens"], body["top_k"]) == (0.6, 64, 20)


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--sampling-arg", "model=gpt"], "--sampling-arg cannot set 'model'"),
        (["--sampling-arg", "messages=[]"], "--sampling-arg cannot set 'messages'"),
        (["--sampling-arg", "tools=[]"], "--sampling-arg cannot set 'tools'"),
        (["--sampling-arg", "stream=true"], "must not set 'stream' to true"),
        (["--sampling-arg", "n=2"], "sampling_args['n'] must be 1, got 2"),
        (["--sampling-arg", "top_k"], "invalid --sampling-arg 'top_k': expected KEY=VALUE"),
        (["--sampling-arg", "=3"], "invalid --sampling-arg '=3'"),
        (["--sampling-arg", "top k=3"], "invalid --sampling-arg 'top k=3'"),
        (
            ["--temperature", "0.2", "--sampling-arg", "temperature=0.3"],
            "--temperature and --sampling-arg temperature both set 'temperature': use one",
        ),
        (
            ["--max-tokens", "9", "--sampling-arg", "max_tokens=3"],
            "--max-tokens and --sampling-arg max_tokens both set 'max_tokens'",
        ),
        (["--sampling-arg", "seed=1", "--sampling-arg", "seed=2"], "'seed' is given twice"),
        (
            ["--seed", "1", "--sampling-arg", "seed=2"],
            "--seed and --sampling-arg seed both set the seed: --seed N gives every rollout "
            "its own seed, --sampling-arg seed=N sends N with every request; use one",
        ),
        (["--temperature", "-1"], "Invalid value for '--temperature'"),
        (["--top-p", "1.5"], "Invalid value for '--top-p'"),
        (["--top-p", "nan"], "Invalid value for '--top-p': 'nan' is not a finite number"),
        (["--temperature", "nan"], "Invalid value for '--temperature': 'nan' is not a finite"),
        (["--temperature", "inf"], "Invalid value for '--temperature': 'inf' is not a finite"),
        (["--max-failure-share", "nan"], "Invalid value for '--max-failure-share': 'nan' is not"),
        (["--max-tokens", "0"], "Invalid value for '--max-tokens'"),
        (["--seed", "x"], "Invalid value for '--seed'"),
        (["--model-retries", "-1"], "Invalid value for '--model-retries'"),
        (["--tool-timeout", "0"], "Invalid value for '--tool-timeout'"),
        (["--rollout-timeout", "0"], "Invalid value for '--rollout-timeout'"),
        (["--reward-timeout", "-2"], "Invalid value for '--reward-timeout'"),
        (["-n", "0"], "Invalid value for '-n' / '--max-examples'"),
    ],
)  # fmt: skip
def test_bad_request_options_are_one_line_errors(
    invoke: Callable[..., Result], tmp_path: Path, args: list[str], expected: str
) -> None:
    result = invoke("run", ANSWER_ENV, *args, "-o", tmp_path / "o.jsonl")
    assert expected in one_line_error(result)
    assert result.exit_code == 2  # the command line is wrong: a usage error


def test_a_nan_sampling_value_stays_a_string(
    invoke: Callable[..., Result], answer_data: Path, tmp_path: Path
) -> None:
    output = tmp_path / "o.jsonl"
    result = invoke(
        "run", ANSWER_ENV, "--data", answer_data, "-n", "1", "-k", "1", "-o", output,
        "--sampling-arg", "stop=NaN",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert lines(output)[0]["definition"]["sampling_args"] == {"stop": "NaN"}


# -- limits ------------------------------------------------------------------------------------


def test_limits_are_set_on_the_environment_and_recorded(
    invoke: Callable[..., Result], answer_data: Path, tmp_path: Path
) -> None:
    output = tmp_path / "o.jsonl"
    result = invoke(
        "run", ANSWER_ENV, "--data", answer_data, "-n", "1", "-k", "1", "-o", output,
        "--model-timeout", "30", "--model-retries", "2", "--tool-timeout", "5",
        "--rollout-timeout", "120",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    limits = lines(output)[0]["definition"]["limits"]
    assert limits["model_timeout"] == 30.0
    assert limits["model_retries"] == 2
    assert limits["tool_timeout"] == 5.0
    assert limits["rollout_timeout"] == 120.0
    again = [
        "run", ANSWER_ENV, "--data", answer_data, "-n", "1", "-k", "1", "-o", output,
        "--model-timeout", "60", "--model-retries", "2", "--tool-timeout", "5",
        "--rollout-timeout", "120",
    ]  # fmt: skip
    changed = one_line_error(invoke(*again))
    assert "limits was" in changed and "--force" in changed
    # retries change how hard a call is tried, not what is measured: not a different run
    more_retries = [*again[:-8], "--model-timeout", "30", "--model-retries", "5", *again[-4:]]
    assert invoke(*more_retries).exit_code == 0


@pytest.mark.parametrize(
    "option", ["--model-timeout", "--model-retries", "--tool-timeout", "--rollout-timeout"]
)
def test_limits_apply_to_base_env_only(
    invoke: Callable[..., Result], tmp_path: Path, option: str
) -> None:
    message = one_line_error(invoke("run", NUMBER_ENV, option, "1", "-o", tmp_path / "o.jsonl"))
    assert f"{option} applies to BaseEnv environments only" in message


@pytest.mark.skipif(
    not hasattr(BaseEnv, "reward_timeout"),
    reason="BaseEnv.reward_timeout comes from helper 'replies'",
)
def test_reward_timeout_is_set_and_recorded(
    invoke: Callable[..., Result], answer_data: Path, tmp_path: Path
) -> None:
    output = tmp_path / "o.jsonl"
    result = invoke(
        "run", ANSWER_ENV, "--data", answer_data, "-n", "1", "-k", "1", "-o", output,
        "--reward-timeout", "7",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert lines(output)[0]["definition"]["limits"]["reward_timeout"] == 7.0


# -- the summary -------------------------------------------------------------------------------


def test_summary_shows_pass_at_k_and_tokens(
    invoke: Callable[..., Result], answer_data: Path, tmp_path: Path
) -> None:
    output = tmp_path / "o.jsonl"
    result = invoke("run", ANSWER_ENV, "--data", answer_data, "-k", "2", "-o", output)
    assert result.exit_code == 0, result.output
    # echo answers even rows right: every rollout of 3 of the 6 groups passes
    for column in ("pass@1", "pass@2", "groups solved"):
        assert column in result.output
    row = next(line for line in result.output.splitlines() if line.startswith("│ correct"))
    assert row.replace("│", " ").split()[-3:] == ["0.500", "0.500", "50%"]
    assert "ended output_exceeded: 0% of rollouts" in result.output
    report = json.loads((tmp_path / "o.report.json").read_text())
    assert report["pass_at_k"]["correct"] == {
        "k": 2,
        "pass_at_1": 0.5,
        "pass_at_k": 0.5,
        "any_success_share": 0.5,
    }


# -- the CLI and run_environment write the same header -----------------------------------------


def cli_args(server_url: str, answer_data: Path, output: Path) -> list[str]:
    return [
        "run", ANSWER_ENV, "--data", str(answer_data), "-n", "2", "-k", "2",
        "--base-url", server_url, "--model", "m", "-o", str(output),
        "--env-arg", "max_tool_calls=3", "--temperature", "0.5", "--seed", "3",
        "--model-timeout", "20",
    ]  # fmt: skip


def api_run(server_url: str, answer_data: Path, output: Path) -> Any:
    sample_envs_importable()
    from sample_envs import AnswerEnv  # the module the CLI imports from the file target

    env = AnswerEnv(max_tool_calls=3)
    env.model_timeout = 20.0
    env.model_retries = DEFAULT_MODEL_RETRIES  # what run gives an env that sets none
    config = RunConfig(
        model="m",
        base_url=server_url,
        base_dir=answer_data,
        max_examples=2,
        group_size=2,
        output=output,
        constructor_args={"max_tool_calls": 3},
        sampling_args={"temperature": 0.5},
        seed=3,
    )

    async def run() -> Any:
        try:
            return await run_environment(env, config)
        finally:
            await env.aclose()

    return asyncio.run(run())


def test_cli_and_api_write_the_same_run_definition(
    invoke: Callable[..., Result], answer_data: Path, tmp_path: Path, threaded_server
) -> None:
    with threaded_server() as server:
        result = invoke(*cli_args(server.base_url, answer_data, tmp_path / "cli.jsonl"))
        assert result.exit_code == 0, result.output
        api_run(server.base_url, answer_data, tmp_path / "api.jsonl")
    cli_header = lines(tmp_path / "cli.jsonl")[0]["definition"]
    assert lines(tmp_path / "api.jsonl")[0]["definition"] == cli_header
    assert cli_header["env"] == {
        "class": "sample_envs:AnswerEnv",
        "constructor_args": {"max_tool_calls": 3},
    }
    assert set(cli_header["env_source"]) == {"sample_envs"}


def test_the_api_resumes_a_file_the_cli_started(
    invoke: Callable[..., Result], answer_data: Path, tmp_path: Path, threaded_server
) -> None:
    output = tmp_path / "cli.jsonl"
    with threaded_server() as server:
        result = invoke(*cli_args(server.base_url, answer_data, output))
        assert result.exit_code == 0, result.output
        report = api_run(server.base_url, answer_data, output)
    assert report.groups_resumed == 2 and report.rollouts_run == 0


def test_the_cli_resumes_a_file_the_api_started(
    invoke: Callable[..., Result], answer_data: Path, tmp_path: Path, threaded_server
) -> None:
    output = tmp_path / "api.jsonl"
    with threaded_server() as server:
        api_run(server.base_url, answer_data, output)
        before = output.read_bytes()
        result = invoke(*cli_args(server.base_url, answer_data, output))
        changed = invoke(*cli_args(server.base_url, answer_data, output), "--seed", "4")
    assert result.exit_code == 0, result.output
    assert "(2 resumed)" in result.output
    assert output.read_bytes() == before
    assert "seed was 3, now 4" in one_line_error(changed)


def test_api_resume_with_other_constructor_args_is_refused(
    invoke: Callable[..., Result], answer_data: Path, tmp_path: Path, threaded_server
) -> None:
    output = tmp_path / "cli.jsonl"
    with threaded_server() as server:
        args = cli_args(server.base_url, answer_data, output)
        args[args.index("max_tool_calls=3")] = "max_tool_calls=4"
        assert invoke(*args).exit_code == 0
        with pytest.raises(ResumeMismatchError, match="env was"):
            api_run(server.base_url, answer_data, output)
