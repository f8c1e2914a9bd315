"""One-GPU check of ``benchmax train``: fp32 masters, bf16 autocast, micro-batches, speed.

    uv run --group trl python benchmarks/gpu_check.py            # one CUDA GPU, ~8 minutes
    uv run --group trl python benchmarks/gpu_check.py --tiny     # the same check on a CPU

A randomly initialised model of Qwen2.5-0.5B's shape (24 layers, hidden 896, 14/2 heads,
vocabulary 151,936, tied embeddings; built from a config, nothing downloaded) with a
word-level tokenizer covering the whole vocabulary and a Qwen-style (ChatML) chat template
trains 3 steps of P = 8 prompts x K = 8 rollouts (64 sequences, micro-batches of 16, so 4
gradient-accumulation passes per optimizer step) under ``--dtype auto`` (bf16 autocast on
a GPU that supports it), with the embedded sampler. The reward (share of even-numbered words
in the reply) differs between random replies, so every step has a gradient.

It asserts that the saved weights are fp32 (the master copy) although the model was saved in
bf16, and that at lr 1e-5 nearly every weight of a layer moved; then prints the peak GPU
memory, seconds per step, and sampled tokens per second of the embedded sampler vs
transformers' ``generate`` (TRL's own generation path without vLLM) on the same batch of
P x K prompts and the same number of new tokens. ``--tiny``: a 2-layer model, P = K = 2,
micro-batches of 2, 2 steps, for CPUs (what CI runs).

Needs torch, transformers, trl, accelerate and benchmax's own dependencies; nothing else.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import re
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
logging.disable(logging.WARNING)  # one "finish_reason 'length' maps to finished" per rollout
warnings.filterwarnings("ignore", category=FutureWarning)  # transformers' renamed options

import torch  # noqa: E402
from tokenizers import Tokenizer, models, pre_tokenizers  # noqa: E402
from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM  # noqa: E402

from benchmax.envs import (  # noqa: E402
    BaseEnv,
    BaseRollout,
    DatasetSplit,
    Example,
    JsonlDataset,
    JsonRow,
    canonical_example_id,
)
from benchmax.rewards import extract_completion_text  # noqa: E402
from benchmax.training import PolicySampler, TrainConfig, read_metrics, train  # noqa: E402

QWEN_TEMPLATE = (
    "{% for m in messages %}"
    "{{ '<|im_start|>' + m.role + '\\n' + m.content + '<|im_end|>\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "[UNK]"]
ROLES = ["system", "user", "assistant", "tool"]


@dataclass(frozen=True)
class Shape:
    """The model and run sizes of one check."""

    layers: int
    hidden: int
    intermediate: int
    heads: int
    kv_heads: int
    vocab: int
    prompts: int
    group: int
    micro_batch: int
    steps: int
    max_tokens: int


QWEN25_05B = Shape(24, 896, 4864, 14, 2, 151_936, 8, 8, 16, 3, 64)
TINY = Shape(2, 64, 128, 4, 2, 4_096, 2, 2, 2, 2, 8)


def build_tokenizer(vocab: int) -> PreTrainedTokenizerFast:
    """Word-level: the special tokens, the role names, then ``w<id>`` up to ``vocab - 1``,
    so every id the model can sample decodes."""
    words = {token: index for index, token in enumerate(SPECIAL + ROLES)}
    for index in range(len(words), vocab):
        words[f"w{index}"] = index
    tokenizer = Tokenizer(models.WordLevel(words, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    wrapped = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        unk_token="[UNK]",
        additional_special_tokens=["<|im_start|>"],
    )
    wrapped.chat_template = QWEN_TEMPLATE
    return wrapped


def build_model(shape: Shape, tokenizer: PreTrainedTokenizerFast) -> Qwen2ForCausalLM:
    config = Qwen2Config(
        vocab_size=shape.vocab,
        hidden_size=shape.hidden,
        intermediate_size=shape.intermediate,
        num_hidden_layers=shape.layers,
        num_attention_heads=shape.heads,
        num_key_value_heads=shape.kv_heads,
        max_position_embeddings=4096,
        rope_theta=1_000_000.0,
        tie_word_embeddings=True,
        bos_token_id=None,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(0)
    return Qwen2ForCausalLM(config)


_WORD = re.compile(r"w(\d+)")


class EvenWordsEnv(BaseEnv):
    """One turn: reply with words; reward ``even`` = share of even-numbered words."""

    reward_keys = ("even",)
    max_turns = 1
    finish_reasons = MappingProxyType({"length": "finished"})  # random replies hit max_tokens

    async def create_dataset(
        self, split: DatasetSplit, base_dir: Path, *, max_examples: int | None = None
    ) -> JsonlDataset[JsonRow]:
        return JsonlDataset(
            base_dir / f"{split}.jsonl", row_to_example=self._example, max_examples=max_examples
        )

    def _example(self, row: JsonRow) -> Example[JsonRow]:
        payload = {"prompt_messages": [{"role": "user", "content": str(row["text"])}]}
        return Example(id=canonical_example_id(payload), payload=payload)

    async def compute_reward(self, rollout: BaseRollout) -> dict[str, float]:
        numbers = [int(n) for n in _WORD.findall(extract_completion_text(rollout.messages))]
        even = [n for n in numbers if n % 2 == 0]
        return {"even": len(even) / len(numbers) if numbers else 0.0}


def write_data(directory: Path, shape: Shape) -> list[str]:
    texts = [" ".join(f"w{10 + 7 * i + j}" for j in range(12)) for i in range(2 * shape.prompts)]
    for split, rows in (("train", texts), ("eval", texts[:2])):
        lines = [json.dumps({"text": text}) for text in rows]
        (directory / f"{split}.jsonl").write_text("\n".join(lines) + "\n")
    return texts


def moved_share(before: dict[str, torch.Tensor], after: dict[str, torch.Tensor]) -> float:
    name = next(n for n in after if "layers.0.self_attn.q_proj.weight" in n)
    return (after[name] != before[name].float()).float().mean().item()


def sampler_tokens_per_second(
    model: Any, tokenizer: Any, prompts: list[str], max_tokens: int
) -> float:
    """The embedded sampler answering every prompt at once over HTTP (ignore_eos)."""
    import aiohttp

    async def go(url: str) -> int:
        async with aiohttp.ClientSession() as session:

            async def one(text: str, seed: int) -> int:
                body = {
                    "model": "policy",
                    "messages": [{"role": "user", "content": text}],
                    "max_tokens": max_tokens,
                    "ignore_eos": True,
                    "seed": seed,
                }
                async with session.post(f"{url}/chat/completions", json=body) as reply:
                    data = await reply.json()
                    return int(data["usage"]["completion_tokens"])

            counts = await asyncio.gather(*(one(t, i) for i, t in enumerate(prompts)))
            return sum(counts)

    with PolicySampler(model, tokenizer, max_batch_size=len(prompts)) as sampler:
        asyncio.run(go(sampler.base_url))  # warm-up
        started = time.perf_counter()
        tokens = asyncio.run(go(sampler.base_url))
        return tokens / (time.perf_counter() - started)


def generate_tokens_per_second(
    model: Any, tokenizer: Any, prompts: list[str], max_tokens: int
) -> float:
    """transformers' ``generate`` on the same prompts, batched and left-padded (TRL's path
    with ``use_vllm=False``), sampling exactly ``max_tokens`` new tokens each."""
    rendered = [
        tokenizer.apply_chat_template(
            [{"role": "user", "content": text}], tokenize=False, add_generation_prompt=True
        )
        for text in prompts
    ]
    tokenizer.padding_side = "left"
    batch = tokenizer(rendered, return_tensors="pt", padding=True, add_special_tokens=False)
    batch = batch.to(model.device)

    def run() -> int:
        with torch.no_grad():
            out = model.generate(
                **batch,
                do_sample=True,
                max_new_tokens=max_tokens,
                min_new_tokens=max_tokens,
                pad_token_id=tokenizer.pad_token_id,
            )
        return int(out.shape[0] * (out.shape[1] - batch["input_ids"].shape[1]))

    run()  # warm-up
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    started = time.perf_counter()
    tokens = run()
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    return tokens / (time.perf_counter() - started)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tiny", action="store_true", help="a 2-layer model, P = K = 2 (CPU)")
    parser.add_argument("--output", type=Path, help="keep the run directory here")
    options = parser.parse_args()
    shape = TINY if options.tiny else QWEN25_05B
    cuda = torch.cuda.is_available()
    if not cuda and not options.tiny:
        print("gpu_check: no CUDA GPU here; run with --tiny on a CPU", file=sys.stderr)
        return 2
    from safetensors.torch import load_file

    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        data, model_dir = root / "data", root / "model"
        data.mkdir()
        texts = write_data(data, shape)
        tokenizer = build_tokenizer(shape.vocab)
        model = build_model(shape, tokenizer).to(torch.bfloat16)  # as Qwen releases are saved
        model.save_pretrained(model_dir)
        tokenizer.save_pretrained(model_dir)
        before = load_file(str(model_dir / "model.safetensors"))
        del model
        output = options.output or root / "run"
        config = TrainConfig(
            model=str(model_dir),
            data=data,
            output_dir=output,
            steps=shape.steps,
            group_size=shape.group,
            prompts_per_step=shape.prompts,
            micro_batch_size=shape.micro_batch,
            max_tokens=shape.max_tokens,
            learning_rate=1e-5,
            dtype="auto",
            eval_examples=1,
            eval_group_size=2,
            seed=0,
            torch_threads=1 if options.tiny else 8,
        )
        if cuda:
            torch.cuda.reset_peak_memory_stats()
        started = time.perf_counter()
        result = train(config, EvenWordsEnv)
        wall = time.perf_counter() - started
        peak = torch.cuda.max_memory_allocated() / 2**30 if cuda else float("nan")
        assert result.checkpoint is not None and result.steps_done == shape.steps
        after = load_file(str(result.checkpoint / "model.safetensors"))
        dtypes = {str(t.dtype) for t in after.values()}
        assert dtypes == {"torch.float32"}, f"master weights are not fp32: {dtypes}"
        moved = moved_share(before, after)
        assert moved > 0.9, f"only {moved:.1%} of layer 0's q_proj moved"
        lines = list(read_metrics(output / "metrics.jsonl"))
        seconds = [line["seconds"]["step"] for line in lines]
        gaps = [line["trainer"].get("logprob_gap") for line in lines]
        from transformers import AutoModelForCausalLM

        device = "cuda" if cuda else "cpu"
        trained = AutoModelForCausalLM.from_pretrained(str(result.checkpoint), dtype=torch.float32)
        trained = trained.to(device).eval()
        batch = [texts[i % shape.prompts] for i in range(shape.prompts * shape.group)]
        sampler_rate = sampler_tokens_per_second(trained, tokenizer, batch, shape.max_tokens)
        generate_rate = generate_tokens_per_second(trained, tokenizer, batch, shape.max_tokens)

    device_name = torch.cuda.get_device_name(0) if cuda else "CPU"
    print(f"device: {device_name}; model: {'tiny' if options.tiny else 'Qwen2.5-0.5B shape'}")
    print(f"fp32 master weights: yes; layer 0 q_proj moved: {moved:.1%}")
    print(f"peak GPU memory: {peak:.2f} GiB" if cuda else "peak GPU memory: n/a (CPU)")
    print(
        f"s/step: {', '.join(f'{s:.2f}' for s in seconds)} "
        f"(P={shape.prompts} K={shape.group} micro-batch {shape.micro_batch}); run {wall:.1f} s"
    )
    print(f"logprob gap (sampler fp32 vs trainer autocast): {gaps}")
    print(
        f"sampled tokens/s on {len(batch)} prompts x {shape.max_tokens} tokens: embedded "
        f"sampler {sampler_rate:.0f}, transformers generate {generate_rate:.0f} "
        f"({sampler_rate / generate_rate:.2f}x)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
