"""Every command ends with the exit statuses ``_exit_codes`` lists for it, each one reached
here by a real invocation, and docs/cli.md's table says the same."""

from __future__ import annotations

import dataclasses
import errno
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from benchmax.bundle import dump_bundle, save_bundle
from benchmax.cli import cli
from benchmax.cli._exit_codes import COMMAND_EXIT_CODES, SERVERS, ExitCode
from benchmax.cli._options import (
    BASE_URL_HELP,
    CONCURRENCY_HELP,
    JSON_HELP,
    MOCK_POLICY_HELP,
    MODEL_HELP,
)

from .conftest import REPO, SAMPLE_ENVS, interruptible

EXAMPLES = REPO / "examples"
QUICKSTART = EXAMPLES / "quickstart"
QUICKSTART_ENV = f"{QUICKSTART}/env.py:QuickStartEnv"
QUICKSTART_POLICY = f"{QUICKSTART}/policy.py:reply"
VALIDATION_ENVS = REPO / "tests" / "validation" / "envs.py"

type Scenario = Callable[[Path], list[str]]


def _run_file(folder: Path, name: str) -> Path:
    output = folder / name
    result = CliRunner().invoke(
        cli,
        [
            "run",
            QUICKSTART_ENV,
            "--data",
            str(QUICKSTART),
            "--mock-policy",
            QUICKSTART_POLICY,
            "-n",
            "2",
            "-k",
            "2",
            "-o",
            str(output),
        ],
    )
    assert result.exit_code == 0, result.output
    return output


def _bundle(folder: Path) -> Path:
    output = folder / "qs.bundle"
    result = CliRunner().invoke(cli, ["bundle", QUICKSTART_ENV, "-o", str(output)])
    assert result.exit_code == 0, result.output
    return output


def _old_bundle(folder: Path) -> Path:
    from tests.cli.test_bundle_commands import NumberEnv

    bundle = dump_bundle(NumberEnv)
    old = dataclasses.replace(
        bundle, metadata=dataclasses.replace(bundle.metadata, benchmax_version="0.1.0")
    )
    save_bundle(old, folder / "old.bundle")
    return folder / "old.bundle"


def _failing_policy(folder: Path) -> str:
    path = folder / "failing_policy.py"
    path.write_text("def reply(request):\n    raise RuntimeError('no model here')\n")
    return f"{path}:reply"


def _first_call_failing_policy(folder: Path) -> str:
    path = folder / "first_call_failing_policy.py"
    quickstart_policy = QUICKSTART_POLICY.rsplit(":", 1)[0]
    path.write_text(
        "import importlib.util\n"
        f"spec = importlib.util.spec_from_file_location('qs_policy', {quickstart_policy!r})\n"
        "quickstart = importlib.util.module_from_spec(spec)\n"
        "spec.loader.exec_module(quickstart)\n"
        "calls = []\n"
        "def reply(body, request):\n"
        "    calls.append(1)\n"
        "    if len(calls) == 1:\n"
        "        raise RuntimeError('the model is down')\n"
        "    return quickstart.reply(body, request)\n"
    )
    return f"{path}:reply"


def _garbage_writer(folder: Path) -> str:
    path = folder / "garbage_policy.py"
    path.write_text("def reply(request):\n    return 'not the JSON object asked for'\n")
    return f"{path}:reply"


_HELD: list[socket.socket] = []


def _taken_port() -> int:
    """A port on 127.0.0.1 another socket listens on (held to the end of the session)."""
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    _HELD.append(taken)
    return int(taken.getsockname()[1])


MISSING = "missing.jsonl"

SCENARIOS: dict[str, dict[ExitCode, Scenario]] = {
    "bundle": {
        ExitCode.SUCCESS: lambda d: ["bundle", QUICKSTART_ENV, "-o", str(d / "b.bundle")],
        ExitCode.CONFIGURATION_ERROR: lambda d: ["bundle", str(d / "nope.py:X"), "-o", "b"],
    },
    "compare": {
        ExitCode.SUCCESS: lambda d: [
            "compare", str(_run_file(d, "a.jsonl")), str(_run_file(d, "b.jsonl")), "--json",
        ],
        ExitCode.CONFIGURATION_ERROR: lambda d: ["compare", str(d / MISSING), str(d / MISSING)],
    },
    "generate-qa": {
        ExitCode.SUCCESS: lambda d: [
            "generate-qa", str(EXAMPLES / "corpus" / "oceans.md"), "-o", str(d / "qa"),
            "--mock-policy", f"{EXAMPLES / 'corpus'}/policy.py:reply", "--json",
        ],
        ExitCode.CHECKS_FAILED: lambda d: [
            "generate-qa", str(EXAMPLES / "corpus" / "oceans.md"), "-o", str(d / "qa"),
            "--mock-policy", _garbage_writer(d), "--no-regenerate",
        ],
        ExitCode.CONFIGURATION_ERROR: lambda d: [
            "generate-qa", str(d / "no-corpus"), "-o", str(d / "qa"),
            "--mock-policy", f"{EXAMPLES / 'corpus'}/policy.py:reply",
        ],
    },
    "init": {
        ExitCode.SUCCESS: lambda d: ["init", str(d / "project")],
        ExitCode.CONFIGURATION_ERROR: lambda d: ["init", str(_bundle(d))],
    },
    "inspect": {
        ExitCode.SUCCESS: lambda d: ["inspect", str(_bundle(d)), "--json"],
        ExitCode.CHECKS_FAILED: lambda d: ["inspect", str(_old_bundle(d))],
        ExitCode.CONFIGURATION_ERROR: lambda d: ["inspect", str(d / "nope.bundle")],
    },
    "rescore": {
        ExitCode.SUCCESS: lambda d: ["rescore", str(_run_file(d, "r.jsonl"))],
        ExitCode.CONFIGURATION_ERROR: lambda d: ["rescore", str(d / MISSING)],
    },
    "run": {
        ExitCode.SUCCESS: lambda d: [
            "run", QUICKSTART_ENV, "--data", str(QUICKSTART), "--mock-policy", QUICKSTART_POLICY,
            "-n", "1", "-k", "2", "-o", str(d / "run.jsonl"), "--json",
        ],
        ExitCode.CHECKS_FAILED: lambda d: [
            "run", QUICKSTART_ENV, "--data", str(QUICKSTART), "--mock-policy", _failing_policy(d),
            "-n", "1", "-k", "2", "-o", str(d / "run.jsonl"), "--max-failure-share", "1",
            "--model-retries", "0",
        ],
        ExitCode.CONFIGURATION_ERROR: lambda d: ["run", str(d / "nope.py:X")],
        ExitCode.UNTRUSTWORTHY: lambda d: [
            "run", QUICKSTART_ENV, "--data", str(QUICKSTART), "--mock-policy",
            _first_call_failing_policy(d), "-n", "2", "-k", "2", "--concurrency", "1",
            "-o", str(d / "run.jsonl"), "--model-retries", "0",
        ],
    },
    "show": {
        ExitCode.SUCCESS: lambda d: ["show", str(_run_file(d, "s.jsonl")), "--json"],
        ExitCode.CONFIGURATION_ERROR: lambda d: ["show", str(d / MISSING)],
    },
    "traces": {
        ExitCode.SUCCESS: lambda d: [
            "traces", str(EXAMPLES / "traces" / "logs"), "-o", str(d / "t"), "--json",
        ],
        ExitCode.CONFIGURATION_ERROR: lambda d: ["traces", str(d / "no-logs"), "-o", str(d)],
    },
    "train": {  # success: tests/train_command (needs the trl group)
        ExitCode.CONFIGURATION_ERROR: lambda d: ["train", str(d / "nope.py:X"), "--data", str(d)],
    },
    "validate": {
        ExitCode.SUCCESS: lambda d: [
            "validate", QUICKSTART_ENV, "--data", str(QUICKSTART),
            "--mock-policy", QUICKSTART_POLICY, "--no-fresh-interpreter",
        ],
        ExitCode.CHECKS_FAILED: lambda d: [
            "validate", f"{VALIDATION_ENVS}:NeedsArgumentEnv", "--data", str(QUICKSTART),
        ],
        ExitCode.CONFIGURATION_ERROR: lambda d: [
            "validate", QUICKSTART_ENV, "--base-url", "http://127.0.0.1:9/v1", "--model", "m",
            "--api-key-env", "BENCHMAX_TEST_UNSET_KEY",
        ],
    },
    "view": {
        ExitCode.SUCCESS: lambda d: ["view", str(_run_file(d, "v.jsonl"))],
        ExitCode.CONFIGURATION_ERROR: lambda d: ["view", str(d / MISSING)],
    },
    "serve": {
        ExitCode.CONFIGURATION_ERROR: lambda d: [
            "serve", str(d / "nope.py:X"), "--protocol", "openenv",
        ],
    },
    "serve-model": {
        ExitCode.CONFIGURATION_ERROR: lambda d: ["serve-model", str(d / "no-checkpoint")],
    },
    "mock-serve": {
        ExitCode.CONFIGURATION_ERROR: lambda d: ["mock-serve", "--port", str(_taken_port())],
    },
    "capture": {
        ExitCode.CONFIGURATION_ERROR: lambda d: [
            "capture", "--upstream", "http://127.0.0.1:9/v1", "--port", str(_taken_port()),
        ],
    },
}  # fmt: skip

SERVER_SUCCESS = {  # ended by a signal: exit 0
    "capture": ["capture", "--upstream", "http://127.0.0.1:9/v1", "--port", "0"],
    "mock-serve": ["mock-serve", "--port", "0"],
    "serve": [
        "serve",
        QUICKSTART_ENV,
        "--data",
        str(QUICKSTART),
        "--port",
        "0",
        "--protocol",
        "nemo-gym",
        "--split",
        "eval",
    ],
}


def test_every_listed_status_has_a_scenario() -> None:
    """The table cannot list a status no test reaches (serve-model and train succeed in
    their own marked suites; mock-serve and serve succeed by a signal, below)."""
    assert set(SCENARIOS) == set(COMMAND_EXIT_CODES) == set(cli.commands)
    for command, codes in COMMAND_EXIT_CODES.items():
        reached = set(SCENARIOS[command]) | {ExitCode.USAGE_ERROR}
        if command in SERVER_SUCCESS or command in ("train", "serve-model"):
            reached.add(ExitCode.SUCCESS)
        if command == "train":  # tests/train_command/test_learning_signal.py
            reached.add(ExitCode.UNTRUSTWORTHY)
        assert reached == codes, command


CASES = [
    pytest.param(command, code, id=f"{command}-{int(code)}")
    for command, scenarios in SCENARIOS.items()
    for code in scenarios
]


@pytest.mark.parametrize(("command", "code"), CASES)
def test_the_command_ends_with_the_status(
    command: str, code: ExitCode, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(SAMPLE_ENVS.parent))
    args = SCENARIOS[command][code](tmp_path)
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == code, (args, result.output)
    if code == ExitCode.SUCCESS and "--json" in args:
        json.loads(result.stdout)  # one JSON document, nothing else on stdout
    if code != ExitCode.SUCCESS:
        assert "Error: " in result.output or "failed" in result.output


@pytest.mark.parametrize("command", sorted(COMMAND_EXIT_CODES))
def test_a_wrong_option_is_a_usage_error(command: str) -> None:
    result = CliRunner().invoke(cli, [command, "--no-such-option"])
    assert result.exit_code == ExitCode.USAGE_ERROR, result.output
    assert "No such option '--no-such-option'" in result.output


@pytest.mark.parametrize("command", sorted(SERVER_SUCCESS))
@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM])
def test_a_server_stopped_by_a_signal_exits_0(command: str, stop: signal.Signals) -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "benchmax.cli", *SERVER_SUCCESS[command]],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        preexec_fn=interruptible,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        assert process.stdout is not None
        for line in process.stdout:
            if "http://127.0.0.1" in line:
                break
        else:
            pytest.fail(f"{command} ended before serving (exit {process.wait()})")
        process.send_signal(stop)
        assert process.wait(timeout=120) == ExitCode.SUCCESS
    finally:
        process.kill()
        process.wait()


def _catches(pid: int, stop: signal.Signals) -> bool:
    """Whether process ``pid`` has a handler installed for ``stop`` (Linux's SigCgt)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("SigCgt:"):
            return bool(int(line.split()[1], 16) >> (stop - 1) & 1)
    return False


def _show_waiting_on_a_fifo(fifo: Path) -> subprocess.Popen[str]:
    """``benchmax show FIFO`` through the console script, in a child that Ctrl-C and SIGTERM
    reach; opening the new FIFO blocks until a writer comes, so the command waits there."""
    os.mkfifo(fifo)
    return subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.argv[0] = 'benchmax';"
         " from benchmax._console_script import main; main()", "show", str(fifo)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=interruptible,
    )  # fmt: skip


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc/PID/status")
@pytest.mark.parametrize(("stop", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_command_stopped_at_any_moment_exits_130_or_143_quietly(
    tmp_path: Path, stop: signal.Signals, status: int
) -> None:
    """The console script from its first line on: a signal while the CLI is still importing
    (it used to print a KeyboardInterrupt traceback from inside an import, or die by
    SIGTERM) or while ``show`` waits to read ends with the status, and no traceback."""
    fifo = tmp_path / "results.jsonl"
    process = _show_waiting_on_a_fifo(fifo)
    try:
        # Python's own startup (before the script's first line) is the only moment left
        # that the signal would end differently: wait until the script's handler is in.
        for _ in range(6000):
            if process.poll() is not None or _catches(process.pid, signal.SIGTERM):
                break
            time.sleep(0.001)
        for _ in range(600):  # once more while it waits, if the first one came too early
            process.send_signal(stop)
            try:
                process.wait(timeout=0.5)
                break
            except subprocess.TimeoutExpired:
                continue
        _, stderr = process.communicate(timeout=60)
        assert process.returncode == status, stderr
        assert "Traceback" not in stderr
    finally:
        process.kill()
        process.wait()


@pytest.mark.parametrize(("stop", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_command_stopped_while_it_reads_exits_130_or_143_quietly(
    tmp_path: Path, stop: signal.Signals, status: int
) -> None:
    """The command's own handling: the signal comes once ``show`` has opened its input (so
    the CLI is imported and the command runs) and waits in read()."""
    fifo = tmp_path / "results.jsonl"
    process = _show_waiting_on_a_fifo(fifo)
    try:
        writer = _writer_once_reading(fifo, process)
        try:
            process.send_signal(stop)
            _, stderr = process.communicate(timeout=120)
        finally:
            os.close(writer)
        assert process.returncode == status, stderr
        assert "Traceback" not in stderr
    finally:
        process.kill()
        process.wait()


def _writer_once_reading(fifo: Path, process: subprocess.Popen[str]) -> int:
    """A write end of ``fifo``, opened once ``process`` has its read end open (until then a
    non-blocking open for writing fails with ENXIO). Bounded: 120 s at most."""
    for _ in range(12_000):
        try:
            return os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        except OSError as error:
            if error.errno != errno.ENXIO:
                raise
        assert process.poll() is None, process.stderr.read() if process.stderr else ""
        time.sleep(0.01)
    raise AssertionError(f"the command never opened {fifo}")


def test_the_console_script_is_the_quiet_entry_point() -> None:
    from importlib.metadata import entry_points

    (script,) = entry_points(group="console_scripts", name="benchmax")
    assert script.value == "benchmax._console_script:main"


def test_importing_benchmax_imports_nothing_heavy() -> None:
    """``import benchmax`` runs before the script can install its handlers: it stays quick
    (no importlib.metadata), and ``benchmax.__version__`` still works."""
    code = (
        "import sys, benchmax; heavy = 'importlib.metadata' in sys.modules;"
        " print(heavy, benchmax.__version__)"
    )
    output = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split()
    assert output[0] == "False"
    assert output[1] == __import__("benchmax").__version__


def _help(command: str, option: str) -> str | None:
    for parameter in cli.commands[command].params:
        if isinstance(parameter, click.Option) and option in parameter.opts:
            return parameter.help
    return None


@pytest.mark.parametrize(
    ("option", "text"),
    [
        ("--mock-policy", MOCK_POLICY_HELP),
        ("--model", MODEL_HELP),
        ("--base-url", BASE_URL_HELP),
        ("--concurrency", CONCURRENCY_HELP),
        ("--json", JSON_HELP),
    ],
)
def test_a_shared_option_has_one_help_text(option: str, text: str) -> None:
    """train's options are derived from TrainConfig's fields (their docs are the help)."""
    # capture's --model is a different thing: the one name its programs may call.
    using = [
        name for name in cli.commands if name not in ("train", "capture") and _help(name, option)
    ]
    assert len(using) >= 2, option
    assert {name: _help(name, option) for name in using} == dict.fromkeys(using, text)


def test_every_reporting_command_has_json() -> None:
    reporting = ["run", "show", "compare", "inspect", "validate", "traces", "generate-qa", "train"]
    assert [name for name in reporting if _help(name, "--json") is None] == []


def test_an_output_option_says_what_it_writes() -> None:
    texts = {name: _help(name, "--output") for name in cli.commands}
    assert all(text.startswith("Write ") for text in texts.values() if text), texts


def test_the_reference_page_lists_each_commands_statuses() -> None:
    page = (REPO / "docs" / "cli.md").read_text(encoding="utf-8")
    table = page[page.index("## Exit codes") :]
    rows = dict(re.findall(r"^\| `([a-z-]+)` \| ([0-9, ]+) \|$", table, flags=re.MULTILINE))
    assert {
        command: {int(code) for code in codes.split(", ")} for command, codes in rows.items()
    } == {command: {int(code) for code in codes} for command, codes in COMMAND_EXIT_CODES.items()}
    for code in ExitCode:
        assert f"| {int(code)} |" in table, code


def test_the_reference_page_is_the_commands_help() -> None:
    """docs/cli.md renders each command's --help from click itself (mkdocs-click)."""
    page = (REPO / "docs" / "cli.md").read_text(encoding="utf-8")
    assert ":module: benchmax.cli" in page and ":command: cli" in page
    for name, command in cli.commands.items():
        assert command.help, name  # what the page shows under each command
    assert SERVERS <= set(cli.commands)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--min-reward", "1", "--max-reward", "0"], "--min-reward 1.0 is greater than"),
        (["--min-reward", "nan"], "--min-reward must be a finite number"),
    ],
)
def test_show_filters_that_contradict_each_other_are_usage_errors(
    tmp_path: Path, args: list[str], message: str
) -> None:
    results = tmp_path / "absent.jsonl"  # the options are refused before the file is read
    result = CliRunner().invoke(cli, ["show", str(results), *args])
    assert result.exit_code == ExitCode.USAGE_ERROR, result.output
    assert message in result.output
