"""The embedded sampler's logprobs are those of the distribution it samples from, as TRL
recomputes them: ``GRPOTrainer`` divides the logits by its ``temperature`` before
``log_softmax``, and so must the sampler (at T = 0.5 the raw ``log_softmax`` is off by
about 0.2 per token). Run with ``uv run --group trl pytest -m train``.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

pytest.importorskip("trl")

import httpx
import torch
from datasets import Dataset
from tests.trl_training.tiny_policy import build_model, build_tokenizer
from trl import GRPOConfig, GRPOTrainer

from benchmax._modelhttp.tokens import CallTokens, read_call_tokens
from benchmax.training import PolicySampler

pytestmark = pytest.mark.train

TEMPERATURE = 0.5
QUESTION = [{"role": "user", "content": "Compute (12 + 7) * 3 using the tools."}]


def _reward(completions: object, **kwargs: object) -> list[float]:
    return [0.0 for _ in completions]  # type: ignore[attr-defined]


async def _sample(url: str, seeds: range) -> list[CallTokens]:
    bodies = [
        {
            "model": "policy",
            "messages": QUESTION,
            "max_tokens": 16,
            "temperature": TEMPERATURE,
            "seed": seed,
            "ignore_eos": True,
            "logprobs": True,
            "return_token_ids": True,
        }
        for seed in seeds
    ]
    async with httpx.AsyncClient(timeout=120) as client:
        replies = await asyncio.gather(
            *(client.post(f"{url}/chat/completions", json=body) for body in bodies)
        )
    found: list[CallTokens] = []
    for reply in replies:
        assert reply.status_code == 200, reply.text
        tokens = read_call_tokens(reply.json())
        assert isinstance(tokens, CallTokens)
        found.append(tokens)
    return found


def test_logprobs_at_temperature_equal_trls_recomputation(tmp_path: Path) -> None:
    torch.manual_seed(0)
    tokenizer = build_tokenizer()
    model = build_model(tokenizer)
    config = GRPOConfig(
        output_dir=str(tmp_path),
        per_device_train_batch_size=2,
        num_generations=2,
        max_steps=1,
        temperature=TEMPERATURE,
        report_to=[],
        use_cpu=True,
        bf16=False,
        save_strategy="no",
        disable_tqdm=True,
    )
    trainer = GRPOTrainer(
        model=model,
        processing_class=tokenizer,
        args=config,
        train_dataset=Dataset.from_list([{"prompt": QUESTION}] * 2),
        reward_funcs=[_reward],
    )
    with PolicySampler(trainer.model, tokenizer, gather_seconds=1.0) as sampler:
        calls = asyncio.run(_sample(sampler.base_url, range(4)))
    worst = 0.0
    raw_gap = 0.0
    for tokens in calls:
        prompt, completion = list(tokens.prompt_token_ids), list(tokens.completion_token_ids)
        ids = torch.tensor([prompt + completion])
        with torch.no_grad():
            trl_logps, _, _ = trainer._get_per_token_logps_and_entropies(
                trainer.model, ids, torch.ones_like(ids), len(completion)
            )
            logits = trainer.model(ids).logits[0, len(prompt) - 1 : -1].float()
        raw = torch.log_softmax(logits, dim=-1)[torch.arange(len(completion)), completion]
        sampled = torch.tensor(tokens.completion_logprobs)
        worst = max(worst, float((trl_logps[0].float() - sampled).abs().max()))
        raw_gap = max(raw_gap, float((raw - sampled).abs().max()))
    assert worst < 1e-4, f"sampler vs TRL logprob gap {worst:.2e} at T={TEMPERATURE}"
    # The raw distribution's logprobs are another quantity (what the sampler reported before).
    assert raw_gap > 1e-2
