"""``benchmax train`` end to end on CPU: a tiny Qwen2 built from a config, the arithmetic
example, the embedded sampler. Each run is a real ``benchmax train`` subprocess.

Asserts the run directory (rollouts readable by show/view/compare/rescore and
read_trajectories, metrics lines, evaluations, base vs final, loadable checkpoints), that a
resumed run continues at the right step with the ids an uninterrupted run uses, that
SIGINT saves a checkpoint and prints the resume command, LoRA adapters, and the training
page in Chromium. Run with ``uv run --group trl pytest -m train -p no:randomly``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("trl")

from click.testing import CliRunner

from benchmax.cli import cli
from benchmax.results import read_results
from benchmax.training import read_metrics, read_trajectories

pytestmark = pytest.mark.train

REPO = Path(__file__).resolve().parents[2]
ARITHMETIC = REPO / "examples" / "arithmetic"
TARGET = f"{ARITHMETIC}/env.py:ArithmeticEnv"
CHROMIUM = Path(os.environ.get("BENCHMAX_CHROMIUM", "/usr/bin/chromium"))
RUN_SECONDS = 900  # a generous bound for one run on a busy 2-core machine
STEPS, GROUP, PROMPTS = 4, 2, 2


def settings(model: Path, output: Path, *extra: str) -> list[str]:
    return [
        TARGET,
        "--data", str(ARITHMETIC),
        "--model", str(model),
        "--output-dir", str(output),
        "-k", str(GROUP),
        "--prompts-per-step", str(PROMPTS),
        "--max-tokens", "6",
        "--eval-examples", "3",
        "--eval-group-size", "2",
        "--learning-rate", "1e-3",
        "--seed", "3",
        *extra,
    ]  # fmt: skip


def benchmax_train(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "benchmax.cli", "train", *args],
        capture_output=True,
        text=True,
        timeout=RUN_SECONDS,
        cwd=REPO,
        env={**os.environ, "COLUMNS": "200"},
    )


def invoke(*args: object) -> Any:
    result = CliRunner().invoke(cli, [str(a) for a in args])
    assert result.exit_code == 0, result.output
    return result


@pytest.fixture(scope="module")
def full_run(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    output = tmp_path_factory.mktemp("full") / "run"
    done = benchmax_train(
        *settings(
            tiny_model, output, "--steps", str(STEPS), "--eval-every", "2", "--save-every", "2"
        )
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return output, done.stdout


@pytest.fixture(scope="module")
def resumed_run(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The same run stopped after step 2, then resumed to step 4."""
    output = tmp_path_factory.mktemp("resumed") / "run"
    first = benchmax_train(
        *settings(tiny_model, output, "--steps", "2", "--eval-every", "2", "--save-every", "2")
    )
    assert first.returncode == 0, first.stderr[-3000:]
    again = benchmax_train(
        "--config", str(output / "config.toml"), "--resume", "--steps", str(STEPS)
    )
    assert again.returncode == 0, again.stderr[-3000:]
    return output, again.stdout


def by_step(path: Path) -> dict[int, list[tuple[str, str, int]]]:
    steps: dict[int, list[tuple[str, str, int]]] = {}
    for rollout in read_results(path).rollouts:
        assert rollout.step is not None
        steps.setdefault(rollout.step, []).append(
            (rollout.rollout_id, rollout.example_id, rollout.group_index)
        )
    return {step: sorted(items) for step, items in steps.items()}


def test_the_rollouts_file_holds_every_step_and_the_tools_read_it(
    full_run: tuple[Path, str],
) -> None:
    output, _ = full_run
    rollouts = output / "rollouts.jsonl"
    results = read_results(rollouts)
    assert results.definition["split"] == "train" and results.definition["tokens"] is True
    assert len(results.rollouts) == STEPS * PROMPTS * GROUP
    for rollout in results.rollouts:
        assert rollout.step is not None and rollout.weights_version == rollout.step - 1
        assert rollout.rollout_id.startswith(f"trl-{rollout.step - 1}-")
    steps = by_step(rollouts)
    assert sorted(steps) == list(range(1, STEPS + 1))
    assert all(len(items) == PROMPTS * GROUP for items in steps.values())
    trajectories = list(read_trajectories(rollouts))
    assert len(trajectories) == len(results.rollouts)
    assert all(t.has_tokens for t in trajectories if t.model_calls)
    shown = invoke("show", rollouts, "--limit", "2").output
    assert "trl-0-0-0" in shown
    written = invoke("view", rollouts, "-o", output / "rollouts.html").output
    assert f"{STEPS * PROMPTS} groups" in written
    rescored = invoke("rescore", rollouts, "-o", output / "rescored.jsonl").output
    assert "rescored" in rescored.lower()
    assert len(read_results(output / "rescored.jsonl").rollouts) == len(results.rollouts)


def test_metrics_have_one_line_per_step(full_run: tuple[Path, str]) -> None:
    output, _ = full_run
    lines = list(read_metrics(output / "metrics.jsonl"))
    assert [line["step"] for line in lines] == list(range(1, STEPS + 1))
    for line in lines:
        assert line["rollouts"] == PROMPTS * GROUP and line["groups"] == PROMPTS
        assert set(line["rewards"]) == {"correct", "bare"}
        assert sum(line["termination_reasons"].values()) == PROMPTS * GROUP
        assert 0 <= line["zero_variance_group_share"] <= 1
        assert line["token_prefix_breaks"] == 0
        # every sampled token of a trainable rollout reached TRL with mask 1
        assert line["token_coverage"] in (1.0, None)  # None: every rollout non-trainable
        assert 1 <= line["completion_tokens"]["max"] <= 6
        assert isinstance(line["trainer"]["loss"], float)
        assert isinstance(line["trainer"]["learning_rate"], float)
        assert line["seconds"]["step"] > 0 and line["seconds"]["generation"] > 0
    assert "eval" in lines[1]["seconds"] and "eval" not in lines[0]["seconds"]


def test_evaluations_and_base_vs_final(full_run: tuple[Path, str]) -> None:
    output, stdout = full_run
    assert sorted(p.name for p in (output / "eval").glob("step-*.jsonl")) == [
        "step-0.jsonl",
        "step-2.jsonl",
        "step-4.jsonl",
    ]
    for step in (0, 2, 4):
        evaluation = read_results(output / "eval" / f"step-{step}.jsonl")
        assert evaluation.definition["split"] == "eval"
        assert evaluation.definition["training_step"] == step
        assert len(evaluation.rollouts) == 3 * 2
    comparison = json.loads((output / "eval" / "compare.json").read_text())
    assert comparison["matched"] == 3
    assert {item["key"] for item in comparison["keys"]} == {"correct", "bare"}
    assert comparison["b"].endswith("step-4.jsonl")
    assert "base vs final" in stdout and "B - A per reward key" in stdout
    printed = invoke("compare", output / "eval" / "step-0.jsonl", output / "eval" / "step-4.jsonl")
    assert "matched 3 examples by id" in printed.output
    config = (output / "config.toml").read_text()
    assert "steps = 4" in config and "resume = false" in config


def test_checkpoints_load_with_from_pretrained(full_run: tuple[Path, str]) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    output, _ = full_run
    for step in (2, 4):
        checkpoint = output / "checkpoints" / f"step-{step}"
        state = json.loads((checkpoint / "trainer_state.json").read_text())
        assert state["global_step"] == step
        assert json.loads((checkpoint / "benchmax_state.json").read_text())["calls_done"] == step
        model = AutoModelForCausalLM.from_pretrained(checkpoint)
        assert model.config.num_hidden_layers == 2
        AutoTokenizer.from_pretrained(checkpoint)


def test_a_resumed_run_continues_where_it_stopped(
    full_run: tuple[Path, str], resumed_run: tuple[Path, str]
) -> None:
    full, _ = full_run
    resumed, stdout = resumed_run
    # The same steps, rollout ids, examples and places in the group (so the same seeds:
    # each is derived from the run seed, the call number in the id, the example and the
    # place) as the run that was not interrupted; every step once.
    assert by_step(resumed / "rollouts.jsonl") == by_step(full / "rollouts.jsonl")
    assert [m["step"] for m in read_metrics(resumed / "metrics.jsonl")] == [1, 2, 3, 4]
    assert read_results(resumed / "rollouts.jsonl").header["run_id"]
    assert sorted(p.name for p in (resumed / "checkpoints").glob("step-*")) == [
        "step-2",
        "step-4",
    ]
    assert "trained 4 steps" in stdout
    compared = invoke("compare", full / "rollouts.jsonl", resumed / "rollouts.jsonl").output
    assert "matched" in compared


def test_sigint_saves_a_checkpoint_and_prints_the_resume_command(
    tiny_model: Path, tmp_path: Path
) -> None:
    output = tmp_path / "run"
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "benchmax.cli",
            "train",
            *settings(tiny_model, output, "--steps", "500"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
        env={**os.environ, "COLUMNS": "200"},
    )
    try:
        deadline = time.monotonic() + RUN_SECONDS
        while not list(read_metrics(output / "metrics.jsonl")):
            assert process.poll() is None, process.communicate()[1][-3000:]
            assert time.monotonic() < deadline, "no step was written"
            time.sleep(0.5)
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=RUN_SECONDS)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 130, stderr[-3000:]
    steps = [m["step"] for m in read_metrics(output / "metrics.jsonl")]
    checkpoint = output / "checkpoints" / f"step-{steps[-1]}"
    assert (checkpoint / "trainer_state.json").is_file() and steps[-1] < 500
    assert "stopping after the current step" in stderr
    # Under uv run, the command starts with uv run and its options (tests/cli/test_launcher.py).
    shown = " ".join(stderr.split())
    assert "resume with: " in shown
    assert f"benchmax train --config {output / 'config.toml'} --resume" in shown


def test_lora_writes_adapter_checkpoints(tiny_model: Path, tmp_path: Path) -> None:
    output = tmp_path / "lora"
    done = benchmax_train(*settings(tiny_model, output, "--steps", "1", "--lora", "4"))
    assert done.returncode == 0, done.stderr[-3000:]
    checkpoint = output / "checkpoints" / "step-1"
    adapter = json.loads((checkpoint / "adapter_config.json").read_text())
    assert adapter["r"] == 4 and adapter["lora_alpha"] == 8
    from peft import AutoPeftModelForCausalLM

    AutoPeftModelForCausalLM.from_pretrained(checkpoint)


@pytest.fixture
def browser_page() -> Iterator[Any]:
    if not CHROMIUM.is_file():
        if os.environ.get("BENCHMAX_REQUIRE_BROWSER"):
            pytest.fail(f"{CHROMIUM} not found")
        pytest.skip(f"{CHROMIUM} not found (apt-get install -y chromium)")
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=str(CHROMIUM), args=["--headless", "--no-sandbox", "--disable-gpu"]
        )
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.errors = []
        page.requests = []
        page.on("pageerror", lambda error: page.errors.append(str(error)))
        page.on("request", lambda request: page.requests.append(request.url))
        try:
            yield page
        finally:
            browser.close()


def test_the_training_page_opens_a_steps_completions(
    full_run: tuple[Path, str], browser_page: Any
) -> None:
    output, _ = full_run
    written = invoke("view", output).output
    assert f"wrote {output / 'training.html'}" in written
    page = browser_page
    page.goto((output / "training.html").resolve().as_uri())
    page.wait_for_selector("body[data-ready=true]", timeout=30_000)
    for chart in ("rewards", "reasons", "lengths", "eval", "loss"):
        assert page.locator(f'[data-testid="chart-{chart}"]').count() == 1
    assert page.locator('[data-testid="compare"] tr[data-key="correct"]').count() == 1
    page.locator('[data-testid="chart-rewards"] circle[data-step="3"]').last.click()
    page.wait_for_selector("#detail:not([hidden])", timeout=30_000)
    assert page.get_attribute("#match-count", "data-count") == str(PROMPTS)
    assert page.inner_text("#detail h2").lower().startswith("step 3")
    ids = page.eval_on_selector_all(
        "#detail .rollout .mono.small", "nodes => nodes.map(n => n.textContent)"
    )
    assert len(ids) == GROUP and all(i.startswith("trl-2-") for i in ids)
    # Every rollout column shows its completion (the arithmetic prompt itself holds a worked
    # assistant turn, so the page's assistant messages outnumber the rollouts).
    columns = page.locator("#detail .rollouts .rollout")
    assert columns.count() == GROUP
    assert all(columns.nth(i).locator(".msg.assistant").count() >= 1 for i in range(GROUP))
    assert page.errors == []
    assert all(url.startswith("file://") for url in page.requests)
