"""A tiny trainable policy for the TRL tests: nothing is fetched from a model hub.

* ``build_tokenizer()`` trains a byte-level BPE tokenizer (``tokenizers``) on text shaped
  like the calculator task and gives it a ChatML chat template that renders tool calls as
  ``<tool_call>{"name": ..., "arguments": ...}</tool_call>``.
* ``build_model(tokenizer)`` is a randomly initialised 2-layer Qwen2 built from a config.
* ``calculator_grammar(tokenizer)`` is an ``allowed_tokens`` hook for benchmax's embedded
  sampler (``benchmax.training.PolicySampler``), which serves the trainer's own model
  object with vLLM-shaped token ids and logprobs and parses the hermes-style tool calls.

A random model never writes a well-formed tool call by itself, so the sampler samples under
a grammar, like vLLM's structured outputs: at every step the next token is drawn from the
model's distribution restricted to the tokens the grammar allows (a forced token is the only
one allowed). The logprob reported for each token is the log-softmax of the logits divided
by the temperature (before the grammar restricts them), which is what the trainer
recomputes. The grammar lets the model choose: call ``add`` or
``multiply`` with 1-3 digit arguments, or answer ``<answer>D+</answer>``.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

from benchmax.auth import ModelRequestContext

SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
ADDED = ["<tool_call>", "</tool_call>", "<answer>", "</answer>"]

CHAT_TEMPLATE = (
    "{% for m in messages %}"
    "{{ '<|im_start|>' + m.role + '\\n' }}"
    "{% if m.role == 'system' and tools %}{{ 'Tools:' }}"
    "{% for t in tools %}{{ ' ' + t.function.name }}{% endfor %}{{ '\\n' }}{% endif %}"
    "{% if m.content is string %}{{ m.content }}{% endif %}"
    "{% if m.tool_calls %}{% for tc in m.tool_calls %}"
    '{{ \'<tool_call>{"name": "\' + tc.function.name + \'", "arguments": \' }}'
    "{% if tc.function.arguments is string %}{{ tc.function.arguments }}"
    "{% else %}{{ tc.function.arguments | tojson }}{% endif %}"
    "{{ '}</tool_call>' }}"
    "{% endfor %}{% endif %}"
    "{{ '<|im_end|>\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)

_CORPUS = [
    "Use the calculator tools, then give the result as <answer>N</answer>.",
    "Compute (12 + 7) * 3 using the tools. Tools: add multiply",
    '<tool_call>{"name": "add", "arguments": {"a": 12, "b": 7}}</tool_call>',
    '<tool_call>{"name": "multiply", "arguments": {"a": 19, "b": 3}}</tool_call>',
    '{"result": 57} The result is <answer>57</answer>. system user assistant tool',
    "Answer the question concisely. Put your final answer in <answer></answer> tags.",
]


def build_tokenizer() -> PreTrainedTokenizerFast:
    """A byte-level BPE (digits split one by one) with a ChatML template; ids are stable."""
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Digits(individual_digits=True), pre_tokenizers.ByteLevel(False)]
    )
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400,
        special_tokens=SPECIAL,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(_CORPUS * 20, trainer=trainer)
    wrapped = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        bos_token=None,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        additional_special_tokens=["<|im_start|>"],
    )
    wrapped.add_tokens(ADDED)
    wrapped.chat_template = CHAT_TEMPLATE
    return wrapped


def build_model(tokenizer: PreTrainedTokenizerFast, seed: int = 0) -> Qwen2ForCausalLM:
    """A randomly initialised 2-layer Qwen2 (about 60k parameters) for ``tokenizer``."""
    torch.manual_seed(seed)
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=2048,
        tie_word_embeddings=True,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=None,
    )
    return Qwen2ForCausalLM(config)


AllowedTokens = Callable[[Sequence[int]], Sequence[int] | None]
RequestFilter = Callable[[Mapping[str, str], Mapping[str, Any]], tuple[int, str] | None]
Grammar = Generator[Sequence[int], int, None]


@dataclass(frozen=True)
class RolloutIdAuth:
    """Model auth sending ``Bearer EMPTY`` and the rollout's id as ``X-Rollout-Id``."""

    async def headers_for_request(self, context: ModelRequestContext) -> Mapping[str, str]:
        return {"Authorization": "Bearer EMPTY", "X-Rollout-Id": context.rollout_id}


def failing(rollout_ids: Sequence[str]) -> RequestFilter:
    """A sampler ``request_filter`` answering HTTP 500 (a model error) to the requests of
    ``rollout_ids`` (named by the ``X-Rollout-Id`` header, see :class:`RolloutIdAuth`)."""
    doomed = set(rollout_ids)

    def refuse(headers: Mapping[str, str], body: Mapping[str, Any]) -> tuple[int, str] | None:
        return (500, "injected failure") if headers.get("X-Rollout-Id") in doomed else None

    return refuse


def calculator_grammar(tokenizer: PreTrainedTokenizerFast) -> AllowedTokens:
    """The ``allowed_tokens`` hook of the calculator grammar (module docs): given the ids
    sampled so far, the ids allowed next (the grammar replayed over them)."""
    encode = _encoder(tokenizer)
    convert = tokenizer.convert_tokens_to_ids
    tool_start, answer_start = convert("<tool_call>"), convert("<answer>")
    tool_end, end = convert("</tool_call>"), convert("<|im_end|>")
    digits = [encode(str(d))[0] for d in range(10)]
    names = {name: encode(name) for name in ("add", "multiply")}

    def force(tokens: Sequence[int]) -> Generator[Sequence[int], int, None]:
        for token in tokens:
            yield [token]

    def number(then: str) -> Generator[Sequence[int], int, None]:
        follow = encode(then)
        yield digits[1:]  # no leading zero: the arguments stay valid JSON
        for _ in range(2):
            if (yield [*digits, follow[0]]) == follow[0]:
                yield from force(follow[1:])
                return
        yield from force(follow)

    def grammar() -> Grammar:
        if (yield [tool_start, answer_start]) == tool_start:
            yield from force(encode('{"name": "'))
            first = yield [tokens[0] for tokens in names.values()]
            name = next(name for name, tokens in names.items() if tokens[0] == first)
            yield from force(names[name][1:])
            yield from force(encode('", "arguments": {"a": '))
            yield from number(', "b": ')
            yield from number("}}")
            yield from force([tool_end, end])
        else:
            yield from number("</answer>")
            yield from force([end])

    def allowed(ids: Sequence[int]) -> Sequence[int] | None:
        replay = grammar()
        choices = next(replay)
        for token in ids:
            try:
                choices = replay.send(token)
            except StopIteration:
                return None
        return choices

    return allowed


def _encoder(tokenizer: PreTrainedTokenizerFast) -> Callable[[str], list[int]]:
    def encode(text: str) -> list[int]:
        return list(tokenizer.encode(text, add_special_tokens=False))

    return encode
