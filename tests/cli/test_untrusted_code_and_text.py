"""What user code and untrusted text can do to the CLI: one ``Error:`` line, escaped controls,
contract errors with their traceback on disk, a full disk, SIGTERM."""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import Result
from tests.cli.conftest import REPO, SAMPLE_ENVS, sample_envs_importable

from benchmax.bundle import dump_bundle, save_bundle
from benchmax.cli._safe_text import terminal_safe
from benchmax.cli._targets import load_class_target
from benchmax.results import read_results

ANSWER_ENV = f"{SAMPLE_ENVS}:AnswerEnv"


def one_line_error(result: Result) -> str:
    assert result.exit_code == 3, (result.exit_code, result.output)
    [line] = result.output.strip().splitlines()
    assert line.startswith("Error: ")
    return line


def env_file(tmp_path: Path, name: str, body: str) -> Path:
    sample_envs_importable()
    path = tmp_path / f"{name}.py"
    path.write_text(
        "from sample_envs import NumberEnv\n\n" + textwrap.dedent(body), encoding="utf-8"
    )
    return path


# --- the shared escaping function ----------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("plain text, tabs\tand\nnewlines", "plain text, tabs\tand\nnewlines"),
        ("\x1b[2J\x1b[31mred\x1b[0m", "\\x1b[2J\\x1b[31mred\\x1b[0m"),
        ("\x1b]8;;http://x\x07link\x1b]8;;\x07", "\\x1b]8;;http://x\\x07link\\x1b]8;;\\x07"),
        ("over\rwrite", "over\\x0dwrite"),
        ("bell\x07 nul\x00 del\x7f csi\x9b", "bell\\x07 nul\\x00 del\\x7f csi\\x9b"),
        ("admin\u202e\u2066 */", "admin\\u202e\\u2066 */"),
        ("line\u2028sep lone\ud800", "line\\u2028sep lone\\ud800"),
        ("é ✓ 😀 中文", "é ✓ 😀 中文"),
    ],
)
def test_terminal_safe_escapes_every_control(raw: str, shown: str) -> None:
    assert terminal_safe(raw) == shown
    assert terminal_safe("a\nb", keep_newlines=False) == "a\\x0ab"


# --- user code raising SystemExit / KeyboardInterrupt ---------------------------------------


@pytest.mark.parametrize(
    ("statement", "shown"),
    [
        ("raise SystemExit(3)", "SystemExit: 3"),
        ("raise SystemExit", "SystemExit"),
        ("raise KeyboardInterrupt", "KeyboardInterrupt"),
        ("import sys; sys.exit('bye')", "SystemExit: bye"),
    ],
)
def test_user_code_stopping_at_import_is_one_error_line(
    invoke: Callable[..., Result], tmp_path: Path, statement: str, shown: str
) -> None:
    path = env_file(tmp_path, "stops_at_import", f"{statement}\n")
    for command in (["run"], ["bundle"]):
        extra = ["-o", tmp_path / "out"] if command == ["bundle"] else ["-o", tmp_path / "o.jsonl"]
        message = one_line_error(invoke(*command, f"{path}:Env", *extra))
        assert message == f"Error: cannot import {path}: {shown}"


@pytest.mark.parametrize("raised", ["SystemExit(2)", "KeyboardInterrupt()"])
def test_user_code_stopping_at_construction_is_one_error_line(
    invoke: Callable[..., Result], tmp_path: Path, raised: str
) -> None:
    path = env_file(
        tmp_path,
        "stops_at_init",
        f"""
        class Env(NumberEnv):
            def __init__(self):
                raise {raised}
        """,
    )
    message = one_line_error(invoke("run", f"{path}:Env", "-o", tmp_path / "o.jsonl"))
    name = raised.partition("(")[0]
    assert message.startswith(f"Error: cannot construct Env: {name}")
    assert not (tmp_path / "o.jsonl").exists()


def test_a_mock_policy_stopping_at_import_is_one_error_line(
    invoke: Callable[..., Result], answer_data: Path, tmp_path: Path
) -> None:
    policy = tmp_path / "bad_policy.py"
    policy.write_text("raise SystemExit(9)\n")
    result = invoke(
        "run", ANSWER_ENV, "--data", answer_data, "--mock-policy", f"{policy}:reply",
        "-o", tmp_path / "o.jsonl",
    )  # fmt: skip
    assert one_line_error(result) == f"Error: cannot import {policy}: SystemExit: 9"


def answer_env_file(tmp_path: Path, hook: str) -> Path:
    """An AnswerEnv subclass whose ``hook`` calls ``sys.exit(3)``."""
    sample_envs_importable()
    bodies = {
        "create_dataset": "async def create_dataset(self, split, base_dir, *, max_examples=None):",
        "list_tools": "async def list_tools(self):",
        "rollout_context": (
            "@contextlib.asynccontextmanager\n    async def rollout_context(self, i, e):"
        ),
        "compute_reward": "async def compute_reward(self, rollout):",
        "compute_group_rewards": "async def compute_group_rewards(self, rollouts):",
    }
    path = tmp_path / f"exits_in_{hook}.py"
    path.write_text(
        "import contextlib, sys\nfrom sample_envs import AnswerEnv\n\n"
        f"class Env(AnswerEnv):\n    {bodies[hook]}\n        sys.exit(3)\n        yield\n",
        encoding="utf-8",
    )
    return path


@pytest.mark.parametrize(
    ("hook", "shown"),
    [
        ("create_dataset", "Error: cannot load the eval split from {data}: SystemExit: 3"),
        ("list_tools", "broke the environment contract in Env.list_tools: RuntimeError:"),
    ],
)
def test_sys_exit_in_a_hook_stops_the_run_with_one_error_line(
    invoke: Callable[..., Result], answer_data: Path, tmp_path: Path, hook: str, shown: str
) -> None:
    path = answer_env_file(tmp_path, hook)
    path.write_text(path.read_text().replace("        yield\n", ""), encoding="utf-8")
    result = invoke("run", f"{path}:Env", "--data", answer_data, "-o", tmp_path / "o.jsonl")
    assert result.exit_code == 3, result.output
    assert "Traceback" not in result.output
    [message] = [line for line in result.output.splitlines() if line.startswith("Error:")]
    assert shown.format(data=answer_data) in message
    if hook != "create_dataset":
        assert "Env." + hook + " called sys.exit(3)" in message


@pytest.mark.parametrize(
    ("hook", "reason"),
    [
        ("compute_reward", "reward_error"),
        ("compute_group_rewards", "group_reward_error"),
        ("rollout_context", "setup_error"),  # beyond.md §9: setting up failed
    ],
)
def test_sys_exit_in_a_reward_hook_settles_every_rollout(
    invoke: Callable[..., Result], answer_data: Path, tmp_path: Path, hook: str, reason: str
) -> None:
    path = answer_env_file(tmp_path, hook)
    if hook != "rollout_context":  # a generator function would not be a coroutine
        path.write_text(path.read_text().replace("        yield\n", ""), encoding="utf-8")
    output = tmp_path / "o.jsonl"
    result = invoke(
        "run", f"{path}:Env", "--data", answer_data, "-o", output, "--max-failure-share", "1"
    )
    assert result.exit_code == 1, result.output  # beyond.md §9: every rollout failed
    assert "Error: every rollout failed (" in result.output
    assert "Traceback" not in result.output
    rollouts = read_results(output).rollouts
    assert len(rollouts) == 6 * 4
    assert {rollout.termination_reason for rollout in rollouts} == {reason}
    messages = [log["message"] for rollout in rollouts for log in rollout.logs]
    assert any(f"Env.{hook} called sys.exit(3)" in message for message in messages)


@pytest.mark.parametrize(
    ("hook", "reason"),
    [("compute_reward", "reward_error"), ("compute_group_rewards", "group_reward_error")],
)
def test_the_summary_names_the_error_of_a_failing_reward_hook(
    invoke: Callable[..., Result], answer_data: Path, tmp_path: Path, hook: str, reason: str
) -> None:
    path = answer_env_file(tmp_path, hook)
    source = path.read_text().replace("        yield\n", "").replace("sys.exit(3)", "1 / 0")
    path.write_text(source, encoding="utf-8")
    result = invoke(
        "run", f"{path}:Env", "--data", answer_data, "-o", tmp_path / "o.jsonl",
        "--max-failure-share", "1",
    )  # fmt: skip
    assert result.exit_code == 1, result.output  # beyond.md §9: every rollout failed
    assert "Error: every rollout failed (" in result.output
    [line] = [line for line in result.output.splitlines() if f"{reason}, e.g." in line]
    assert line.endswith(f"ZeroDivisionError: division by zero (at {path.name}:6 in {hook})"), line


# --- control sequences in what the CLI prints -----------------------------------------------

ESCAPES = "\x1b[2J\x1b]0;owned\x07\u202e\r"


def test_error_lines_show_control_sequences_escaped(
    invoke: Callable[..., Result], tmp_path: Path
) -> None:
    path = env_file(tmp_path, "noisy_import", f"raise ValueError({ESCAPES!r} + 'boom')\n")
    message = one_line_error(invoke("run", f"{path}:Env", "-o", tmp_path / "o.jsonl"))
    assert "\x1b" not in message and "\u202e" not in message and "\r" not in message
    assert message.endswith("ValueError: \\x1b[2J\\x1b]0;owned\\x07\\u202e boom")  # \\r: a space


def test_inspect_shows_metadata_and_source_escaped(
    invoke: Callable[..., Result], tmp_path: Path
) -> None:
    controls = "\x1b[2J\x1b]0;owned\x07\u202e"  # written raw into the source file
    source = env_file(
        tmp_path,
        "sneaky_env",
        "class SneakyEnv(NumberEnv):\n"
        f'    """Looks harmless.{controls}"""\n'
        '    # access = "user"\u202e \u2066# admin\n',
    )
    target = load_class_target(f"{source}:SneakyEnv")
    bundle = dump_bundle(
        target.env_class, local_modules=[target.module, sys.modules["sample_envs"]]
    )
    assert controls in bundle.metadata.env_class_source
    bundle_file = tmp_path / "sneaky.bundle"
    save_bundle(bundle, bundle_file)
    shown = invoke("inspect", bundle_file)
    assert shown.exit_code == 0, shown.output
    output = shown.output
    for control in ("\x1b", "\x07", "\u202e", "\u2066"):
        assert control not in output
    assert "Looks harmless.\\x1b[2J\\x1b]0;owned\\x07\\u202e" in output
    assert '# access = "user"\\u202e \\u2066# admin' in output


def test_failure_reasons_in_the_summary_show_model_text_escaped(
    invoke: Callable[..., Result], tmp_path: Path
) -> None:
    path = env_file(
        tmp_path,
        "failing_env",
        f"""
        from benchmax.envs import RolloutFailure

        class FailingEnv(NumberEnv):
            async def run_rollout(self, request):
                raise RolloutFailure("sandbox_error", {ESCAPES[:-1]!r} + "tool said no")
        """,
    )
    result = invoke("run", f"{path}:FailingEnv", "-n", "1", "-k", "1", "-o", tmp_path / "o.jsonl")
    assert result.exit_code == 1, result.output  # beyond.md §9: every rollout failed
    assert "Error: every rollout failed (" in result.output
    [line] = [line for line in result.output.splitlines() if "e.g. rollout" in line]
    assert line.endswith(
        "\\x1b[2J\\x1b]0;owned\\x07\\u202etool said no (at failing_env.py:8 in run_rollout)"
    )
    assert "\x1b" not in result.output.replace("\x1b[", "")  # rich styling aside


# --- contract errors and a full disk through the CLI ----------------------------------------


def test_a_contract_error_is_one_line_naming_the_hook_and_the_traceback_file(
    invoke: Callable[..., Result], tmp_path: Path
) -> None:
    path = env_file(
        tmp_path,
        "broken_env",
        """
        class BrokenEnv(NumberEnv):
            async def run_rollout(self, request):
                raise AttributeError("no such\\nattribute")
        """,
    )
    output = tmp_path / "o.jsonl"
    result = invoke("run", f"{path}:BrokenEnv", "-k", "2", "--concurrency", "1", "-o", output)
    assert result.exit_code == 3
    assert "Traceback" not in result.output and "additional rollout" not in result.output
    [message] = [line for line in result.output.splitlines() if line.startswith("Error:")]
    log = tmp_path / "o.error.log"
    assert message == (
        "Error: example 0 (ex-0) broke the environment contract in BrokenEnv.run_rollout: "
        f"AttributeError: no such attribute (traceback in {log})"
    )
    text = log.read_text()
    assert text.count("=== ") == 1
    assert 'broken_env.py", line 6, in run_rollout' in text
    assert "AttributeError: no such\nattribute" in text
    assert "--- 1 record(s) the group logged before it stopped:" in text
    assert "ERROR benchmax.envs.environment: additional rollout contract error: no such" in text


def _limit_file_size() -> None:
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (3072, resource.RLIM_INFINITY))


def test_a_full_disk_stops_the_run_with_one_line_and_the_run_resumes(
    answer_data: Path, tmp_path: Path, invoke: Callable[..., Result]
) -> None:
    output = tmp_path / "o.jsonl"
    args = ["run", ANSWER_ENV, "--data", str(answer_data), "-k", "2", "--concurrency", "1"]
    process = subprocess.run(
        [sys.executable, "-m", "benchmax.cli", *args, "-o", str(output)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=_limit_file_size,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert process.returncode == 3, process.stderr
    [line] = [line for line in process.stderr.splitlines() if line.startswith("Error:")]
    assert line.startswith(f"Error: cannot write the results file {output}: File too large;")
    assert "contract" not in process.stderr and "Traceback" not in process.stderr
    data = output.read_bytes()
    assert 0 < len(data) <= 3072 and data.endswith(b"\n")
    saved = {r.example_index for r in read_results(output).rollouts}
    assert 0 < len(saved) < 6
    resumed = invoke(*args, "-o", output)
    assert resumed.exit_code == 0, resumed.output
    assert f"({len(saved)} resumed)" in resumed.output
    assert len(read_results(output).rollouts) == 12


def test_sigterm_interrupts_like_ctrl_c_inside_the_block_only() -> None:
    from benchmax.cli._signals import terminate_like_interrupt

    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(KeyboardInterrupt), terminate_like_interrupt() as signals:
        os.kill(os.getpid(), signal.SIGTERM)  # the handler runs before the next line
        pytest.fail("SIGTERM did not interrupt")
    assert signals.received == [signal.SIGTERM] and signals.exit_status == 143
    assert signal.getsignal(signal.SIGTERM) == before
    with terminate_like_interrupt() as quiet:
        pass
    assert quiet.exit_status == 130


def test_a_record_made_before_the_block_is_the_one_sigterm_fills() -> None:
    # benchmax run makes it before entering the block, so an interrupt while the
    # block is entered still finds it (it used to be bound only by ``as``).
    from benchmax.cli._signals import TerminationSignals, terminate_like_interrupt

    record = TerminationSignals()
    with pytest.raises(KeyboardInterrupt), terminate_like_interrupt(record) as signals:
        assert signals is record
        os.kill(os.getpid(), signal.SIGTERM)
        pytest.fail("SIGTERM did not interrupt")
    assert record.received == [signal.SIGTERM] and record.exit_status == 143


def test_names_the_environment_chose_are_shown_escaped(
    invoke: Callable[..., Result], tmp_path: Path
) -> None:
    path = env_file(
        tmp_path,
        "odd_names_env",
        """
        from benchmax.envs import RolloutAttempt, RolloutFailure

        class OddNamesEnv(NumberEnv):
            reward_keys = ("hit\\x1b[8m", "value")

            async def run_rollout(self, request):
                attempt = await super().run_rollout(request)
                if request.rollout_id.endswith(".r1"):
                    raise RolloutFailure("odd\\x1b]0;t\\x07[red]", "x")
                rewards = attempt.rewards
                return RolloutAttempt(
                    rollout_id=attempt.rollout_id,
                    termination_reason="finished",
                    rewards={"hit\\x1b[8m": rewards["hit"], "value": rewards["value"]},
                )
        """,
    )
    result = invoke("run", f"{path}:OddNamesEnv", "-n", "1", "-k", "2", "-o", tmp_path / "o.jsonl")
    assert result.exit_code == 4, result.output  # one of two rollouts failed: untrustworthy
    assert "\x07" not in result.output and "\x1b[8m" not in result.output
    assert "mean hit\\x1b[8m" in result.output  # the progress bar
    assert "odd\\x1b]0;t\\x07[red]" in result.output  # the reasons table and e.g. line
