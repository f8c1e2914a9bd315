"""``benchmax serve-model`` end to end: a saved checkpoint and a LoRA adapter on it, served on
127.0.0.1 and evaluated with ``benchmax run --tokens`` and ``benchmax compare``.

The checkpoint is the tests' tiny random Qwen2 and trained tokenizer (``tiny_policy``),
saved with ``save_pretrained``; nothing is fetched. Run with
``uv run --group trl pytest -m trl``.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from queue import Empty, Queue

import pytest

pytest.importorskip("transformers")

import torch
from tests.trl_training.tiny_policy import build_model, build_tokenizer
from transformers import AutoModelForCausalLM

from benchmax.training import load_model, read_trajectories

pytestmark = pytest.mark.trl

ROOT = Path(__file__).resolve().parents[2]
BENCHMAX = (sys.executable, "-m", "benchmax.cli")
STARTUP_SECONDS = 600  # importing torch and transformers on a loaded machine


@contextmanager
def serving(checkpoint: Path, name: str, stop: signal.Signals) -> Iterator[str]:
    """Run ``benchmax serve-model`` on a free port; yield its base URL; stop it with
    ``stop`` and check it exited cleanly and released the port."""
    process = subprocess.Popen(
        [*BENCHMAX, "serve-model", str(checkpoint), "--port", "0", "--model-name", name],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines: Queue[str] = Queue()
    seen: list[str] = []
    assert process.stdout is not None
    reader = threading.Thread(target=lambda: [lines.put(line) for line in process.stdout or ()])
    reader.start()
    url = None
    try:
        while url is None:
            try:
                line = lines.get(timeout=STARTUP_SECONDS)
            except Empty:
                pytest.fail("serve-model printed no URL: " + "".join(seen))
            seen.append(line)
            found = re.search(r"on (http://127\.0\.0\.1:\d+/v1)", line)
            url = found.group(1) if found else None
            assert process.poll() is None or url, "".join(seen)
        yield url
    finally:
        process.send_signal(stop)
        code = process.wait(timeout=120)
        reader.join(timeout=60)
    assert code == 0, "".join(seen)


def _run(url: str, name: str, output: Path, seed: int) -> None:
    completed = subprocess.run(
        [
            *(*BENCHMAX, "run", "examples/quickstart/env.py:QuickStartEnv"),
            *("--data", "examples/quickstart", "--split", "train", "-n", "2", "-k", "2"),
            *("--base-url", url, "--model", name, "--tokens", "--max-tokens", "8"),
            *("--seed", str(seed), "-o", str(output)),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr


def _scored(model: torch.nn.Module, prompt: list[int], sampled: list[int]) -> list[float]:
    with torch.no_grad():
        logits = model(torch.tensor([prompt + sampled])).logits[0].float()
    scores = torch.log_softmax(logits[len(prompt) - 1 : -1], dim=-1)
    return scores[torch.arange(len(sampled)), torch.tensor(sampled)].tolist()


def _checkpoint(tmp_path: Path) -> Path:
    tokenizer = build_tokenizer()
    checkpoint = tmp_path / "checkpoints" / "step-2"
    build_model(tokenizer, seed=4).save_pretrained(checkpoint)
    tokenizer.save_pretrained(checkpoint)
    return checkpoint


def _assert_served_by(model: torch.nn.Module, results: Path) -> None:
    """The recorded logprobs are ``model``'s own scores of the sampled tokens."""
    model.eval()
    trajectories = list(read_trajectories(results))
    assert len(trajectories) == 4
    for trajectory in trajectories:
        (call,) = trajectory.model_calls
        prompt = list(call.prompt_token_ids or ())
        sampled = list(call.completion_token_ids or ())
        assert 0 < len(sampled) <= 8
        assert _scored(model, prompt, sampled) == pytest.approx(
            list(call.completion_logprobs or ()), abs=1e-4
        )


def test_a_checkpoint_is_served_until_ctrl_c_and_evaluated(tmp_path: Path) -> None:
    checkpoint = _checkpoint(tmp_path)
    results = [tmp_path / "a.jsonl", tmp_path / "b.jsonl"]
    with serving(checkpoint, "step-2", signal.SIGINT) as url:  # Ctrl-C
        for seed, output in enumerate(results):
            _run(url, "step-2", output, seed)
    compare = subprocess.run(
        [*BENCHMAX, "compare", str(results[0]), str(results[1])],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert compare.returncode == 0, compare.stdout + compare.stderr
    assert "correct" in compare.stdout
    model, _ = load_model(str(checkpoint))
    for output in results:
        _assert_served_by(model, output)


def test_a_lora_adapter_is_served_on_its_base_until_sigterm(tmp_path: Path) -> None:
    peft = pytest.importorskip("peft")
    checkpoint = _checkpoint(tmp_path)
    base = AutoModelForCausalLM.from_pretrained(checkpoint)
    config = peft.LoraConfig(r=4, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    adapter = tmp_path / "adapter"
    peft.get_peft_model(base, config).save_pretrained(adapter)
    written = json.loads((adapter / "adapter_config.json").read_text())
    assert written["base_model_name_or_path"] == str(checkpoint)
    results = tmp_path / "lora.jsonl"
    with serving(adapter, "lora", signal.SIGTERM) as url:
        _run(url, "lora", results, 0)
    lora_model, _ = load_model(str(adapter))
    _assert_served_by(lora_model, results)
    # ... and not the base's: the adapter changes the distribution.
    call = next(iter(read_trajectories(results))).model_calls[0]
    prompt, sampled = list(call.prompt_token_ids or ()), list(call.completion_token_ids or ())
    base_model, _ = load_model(str(checkpoint))
    assert _scored(base_model.eval(), prompt, sampled) != pytest.approx(
        _scored(lora_model.eval(), prompt, sampled), abs=1e-4
    )


def test_serve_model_refuses_a_missing_checkpoint_in_one_line(tmp_path: Path) -> None:
    completed = subprocess.run(
        [*BENCHMAX, "serve-model", str(tmp_path / "nothing"), "--port", "0"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=STARTUP_SECONDS,
    )
    assert completed.returncode == 3
    assert completed.stderr.strip().splitlines()[-1] == (
        f"Error: model directory '{tmp_path / 'nothing'}' does not exist"
    )
