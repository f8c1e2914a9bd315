"""A tiny trainable policy for the TRL tests: nothing is fetched from a model hub.

* ``build_tokenizer()`` trains a byte-level BPE tokenizer (``tokenizers``) on text shaped
  like the calculator task and gives it a ChatML chat template that renders tool calls as
  ``<tool_call>{"name": ..., "arguments": ...}</tool_call>``.
* ``build_model(tokenizer)`` is a randomly initialised 2-layer Qwen2 built from a config.
* ``PolicyServer(model, tokenizer)`` is an OpenAI-compatible chat-completions server on
  127.0.0.1 (a thread) that samples from the model's *current* weights — the trainer's own
  model object — and answers as vLLM does with ``return_token_ids`` and ``logprobs``:
  ``prompt_token_ids`` on the reply, ``token_ids`` and ``logprobs.content`` (tokens as
  ``token_id:N``) on the choice, tool calls parsed from the sampled text (hermes style).

A random model never writes a well-formed tool call by itself, so the server samples under a
grammar, like vLLM's structured outputs: at every step the next token is drawn from the
model's distribution restricted to the tokens the grammar allows (a forced token is the only
one allowed). The logprob reported for each token is the model's raw log-softmax, which is
what the trainer recomputes. The grammar lets the model choose: call ``add`` or
``multiply`` with 1-3 digit arguments, or answer ``<answer>D+</answer>``.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
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


@dataclass(frozen=True)
class RolloutIdAuth:
    """Model auth sending ``Bearer EMPTY`` and the rollout's id as ``X-Rollout-Id``."""

    async def headers_for_request(self, context: ModelRequestContext) -> Mapping[str, str]:
        return {"Authorization": "Bearer EMPTY", "X-Rollout-Id": context.rollout_id}


@dataclass
class Sampled:
    """One completion: the ids and raw logprobs the server returned, and its text."""

    prompt_ids: list[int]
    completion_ids: list[int]
    logprobs: list[float]
    text: str


@dataclass
class _Grammar:
    """Token-level choices of the calculator grammar (see the module docstring)."""

    tokenizer: PreTrainedTokenizerFast
    tool_start: int = field(init=False)
    answer_start: int = field(init=False)
    end: int = field(init=False)
    digits: list[int] = field(init=False)
    names: dict[str, list[int]] = field(init=False)

    def __post_init__(self) -> None:
        convert = self.tokenizer.convert_tokens_to_ids
        self.tool_start = convert("<tool_call>")
        self.answer_start = convert("<answer>")
        self.end = convert("<|im_end|>")
        self.digits = [self.encode(str(d))[0] for d in range(10)]
        self.names = {name: self.encode(name) for name in ("add", "multiply")}

    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer.encode(text, add_special_tokens=False))


class PolicyServer:
    """OpenAI-compatible ``/v1/chat/completions`` on 127.0.0.1 sampling from ``model``.

    ``fail_rollouts`` holds rollout ids whose requests are answered with HTTP 500 (a model
    error); a request names its rollout in the ``X-Rollout-Id`` header (see ``RolloutIdAuth``).
    ``sampled`` lists every completion returned, in order; ``requests`` every request body.
    """

    def __init__(
        self,
        model: torch.nn.Module,
        tokenizer: PreTrainedTokenizerFast,
        *,
        fail_rollouts: Sequence[str] = (),
        seed: int = 0,
        free_tokens: int | None = None,
    ) -> None:
        self.model = model
        self.free_tokens = free_tokens
        self.tokenizer = tokenizer
        self.fail_rollouts = set(fail_rollouts)
        self.sampled: list[Sampled] = []
        self.requests: list[dict[str, Any]] = []
        self.generation_seconds = 0.0
        self._grammar = _Grammar(tokenizer)
        self._lock = threading.Lock()
        self._generator = torch.Generator().manual_seed(seed)
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        assert self._httpd is not None
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def __enter__(self) -> PolicyServer:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:  # /v1/models: this server serves any model name
                data = json.dumps({"object": "list", "data": [{"id": "policy"}]}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(length))
                status, reply = server.answer(body, self.headers.get("X-Rollout-Id"))
                data = json.dumps(reply).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._httpd is not None and self._thread is not None
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join()

    def answer(self, body: dict[str, Any], rollout_id: str | None) -> tuple[int, dict[str, Any]]:
        with self._lock:
            self.requests.append(body)
            if rollout_id in self.fail_rollouts:
                return 500, {"error": {"message": "injected failure", "type": "server_error"}}
            started = time.perf_counter()
            prompt_text = self.tokenizer.apply_chat_template(
                body["messages"],
                tools=body.get("tools"),
                add_generation_prompt=True,
                tokenize=False,
            )
            prompt_ids = self._grammar.encode(prompt_text)
            if isinstance(body.get("seed"), int):  # per request: reproducible under concurrency
                turn = sum(1 for m in body["messages"] if m.get("role") == "assistant")
                self._generator.manual_seed(body["seed"] * 1009 + turn)
            if self.free_tokens is None:
                sample = self._sample(prompt_ids)
            else:
                temperature = body.get("temperature", 1.0)
                sample = self._sample_freely(prompt_ids, self.free_tokens, float(temperature))
            self.sampled.append(sample)
            self.generation_seconds += time.perf_counter() - started
        return 200, self._reply(body, sample)

    # -- sampling under the grammar ------------------------------------------------------

    def _sample(self, prompt_ids: list[int]) -> Sampled:
        g = self._grammar
        ids: list[int] = []
        logprobs: list[float] = []
        cache: list[Any] = [None]  # the model's key/value cache up to the last token fed

        def step(allowed: Sequence[int]) -> int:
            fresh = prompt_ids if not ids else ids[-1:]
            with torch.no_grad():
                out = self.model(input_ids=torch.tensor([fresh]), cache=cache[0], use_cache=True)
            cache[0] = out.cache
            full = torch.log_softmax(out.logits[0, -1].float(), dim=-1)
            choices = torch.tensor(list(allowed))
            probs = torch.softmax(full[choices], dim=-1)
            pick = int(choices[torch.multinomial(probs, 1, generator=self._generator)])
            ids.append(pick)
            logprobs.append(float(full[pick]))
            return pick

        def force(text_or_ids: str | Sequence[int]) -> None:
            for token in g.encode(text_or_ids) if isinstance(text_or_ids, str) else text_or_ids:
                step([token])

        def number(then: str) -> None:
            follow = g.encode(then)
            step(g.digits[1:])  # no leading zero: the arguments stay valid JSON
            for _ in range(2):
                if step([*g.digits, follow[0]]) == follow[0]:
                    force(follow[1:])
                    return
            force(follow)

        if step([g.tool_start, g.answer_start]) == g.tool_start:
            force('{"name": "')
            first = step([tokens[0] for tokens in g.names.values()])
            name = next(name for name, tokens in g.names.items() if tokens[0] == first)
            force(g.names[name][1:])
            force('", "arguments": {"a": ')
            number(', "b": ')
            number("}}")
            force([self.tokenizer.convert_tokens_to_ids("</tool_call>"), g.end])
        else:
            number("</answer>")
            force([g.end])
        text = self.tokenizer.decode(ids[:-1])  # without <|im_end|>
        return Sampled(prompt_ids, ids, logprobs, text)

    def _sample_freely(self, prompt_ids: list[int], limit: int, temperature: float) -> Sampled:
        """Plain sampling (no top-k/top-p) until EOS or ``limit`` tokens; the logprobs are
        the model's raw log-softmax (vLLM's default ``raw_logprobs``)."""
        eos = self.tokenizer.eos_token_id
        ids: list[int] = []
        logprobs: list[float] = []
        past = None
        step_input = torch.tensor([prompt_ids])
        with torch.no_grad():
            for _ in range(limit):
                out = self.model(input_ids=step_input, cache=past, use_cache=True)
                past = out.cache
                full = torch.log_softmax(out.logits[0, -1].float(), dim=-1)
                weights = torch.softmax(full / max(temperature, 1e-3), dim=-1)
                pick = int(torch.multinomial(weights, 1, generator=self._generator))
                ids.append(pick)
                logprobs.append(float(full[pick]))
                if pick == eos:
                    break
                step_input = torch.tensor([[pick]])
        text = self.tokenizer.decode(ids, skip_special_tokens=True)
        return Sampled(prompt_ids, ids, logprobs, text)

    def _reply(self, body: dict[str, Any], sample: Sampled) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": sample.text}
        finish_reason = "stop"
        if self.free_tokens is not None and sample.completion_ids[-1:] != [
            self.tokenizer.eos_token_id
        ]:
            finish_reason = "length"
        if sample.text.startswith("<tool_call>"):
            call = json.loads(sample.text.removeprefix("<tool_call>").removesuffix("</tool_call>"))
            arguments = sample.text[sample.text.index('"arguments": ') + 13 : -len("}</tool_call>")]
            message = {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": f"call_{len(self.sampled)}",
                        "type": "function",
                        "function": {"name": call["name"], "arguments": arguments},
                    }
                ],
            }
            finish_reason = "tool_calls"
        choice: dict[str, Any] = {
            "index": 0,
            "message": message,
            "finish_reason": finish_reason,
            "stop_reason": None,
            "logprobs": None,
        }
        if body.get("logprobs"):
            choice["logprobs"] = {
                "content": [
                    {"token": f"token_id:{token}", "logprob": lp, "bytes": None, "top_logprobs": []}
                    for token, lp in zip(sample.completion_ids, sample.logprobs, strict=True)
                ]
            }
        reply: dict[str, Any] = {
            "id": f"chatcmpl-{len(self.sampled)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", "tiny"),
            "choices": [choice],
            "usage": {
                "prompt_tokens": len(sample.prompt_ids),
                "completion_tokens": len(sample.completion_ids),
                "total_tokens": len(sample.prompt_ids) + len(sample.completion_ids),
            },
        }
        if body.get("return_token_ids"):
            choice["token_ids"] = sample.completion_ids
            reply["prompt_token_ids"] = sample.prompt_ids
        return reply
