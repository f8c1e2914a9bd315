"""Stand-in for the sampler branch's ``PolicySampler`` (same interface; one request at a time).

An OpenAI-compatible ``/v1/chat/completions`` server on 127.0.0.1 (a thread) sampling from
the *live* model object with vLLM-shaped token data: ``prompt_token_ids`` on the reply,
``token_ids`` and ``logprobs.content`` (tokens as ``token_id:N``) on the choice. Honours
``max_tokens``, ``temperature`` (0: greedy), ``top_p``, ``seed`` and ``stop`` (strings).
The logprob of each token is the model's raw log-softmax. Adapted from the tests' policy
server; the sampler branch replaces this file with the batched sampler.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["PolicySampler"]


class PolicySampler:
    """Serve ``model``'s current weights over ``/v1`` (see the module docstring)."""

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        model_name: str = "policy",
        host: str = "127.0.0.1",
        port: int = 0,
        max_batch_size: int = 64,
    ) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.model_name = model_name
        self._host = host
        self._port = port
        self._max_batch_size = max_batch_size
        self._version = 0
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._replies = 0

    @property
    def base_url(self) -> str:
        if self._httpd is None:
            raise RuntimeError("the sampler is not started")
        return f"http://{self._host}:{self._httpd.server_address[1]}/v1"

    @property
    def weights_version(self) -> int:
        return self._version

    def weights_updated(self) -> None:
        self._version += 1

    def __enter__(self) -> PolicySampler:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> None:
        sampler = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _send(self, status: int, reply: dict[str, Any]) -> None:
                data = json.dumps(reply).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                self._send(200, {"object": "list", "data": [{"id": sampler.model_name}]})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                try:
                    body = json.loads(self.rfile.read(length))
                    reply = sampler._answer(body)
                except Exception as error:  # a bad request settles as that call's error
                    message = f"{type(error).__name__}: {error}"
                    self._send(400, {"error": {"message": message, "type": "bad_request"}})
                    return
                self._send(200, reply)

        self._httpd = ThreadingHTTPServer((self._host, self._port), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, name="benchmax-policy-sampler", daemon=True
        )
        self._thread.start()

    def close(self) -> None:
        if self._httpd is None or self._thread is None:
            return
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join()
        self._httpd = None

    def _answer(self, body: dict[str, Any]) -> dict[str, Any]:
        import torch

        prompt_ids = list(
            self.tokenizer.apply_chat_template(
                body["messages"],
                tools=body.get("tools"),
                add_generation_prompt=True,
                tokenize=True,
                return_dict=False,
            )
        )
        if prompt_ids and isinstance(prompt_ids[0], list):
            prompt_ids = prompt_ids[0]
        limit = int(body.get("max_tokens") or body.get("max_completion_tokens") or 256)
        temperature = float(body.get("temperature", 1.0))
        top_p = float(body.get("top_p", 1.0))
        stops = body.get("stop") or []
        stops = [stops] if isinstance(stops, str) else list(stops)
        generator = torch.Generator()
        if isinstance(body.get("seed"), int):
            generator.manual_seed(body["seed"])
        else:
            generator.seed()
        eos = self.tokenizer.eos_token_id
        ids: list[int] = []
        logprobs: list[float] = []
        finish = "length"
        with self._lock, torch.no_grad():
            past = None
            step_input = torch.tensor([prompt_ids])
            for _ in range(limit):
                out = self.model(input_ids=step_input, past_key_values=past, use_cache=True)
                past = out.past_key_values
                full = torch.log_softmax(out.logits[0, -1].float(), dim=-1)
                pick = _pick(full, temperature, top_p, generator)
                ids.append(pick)
                logprobs.append(float(full[pick]))
                if pick == eos:
                    finish = "stop"
                    break
                if stops and any(s in self.tokenizer.decode(ids) for s in stops):
                    finish = "stop"
                    break
                step_input = torch.tensor([[pick]])
        text = self.tokenizer.decode(ids, skip_special_tokens=True)
        self._replies += 1
        choice: dict[str, Any] = {
            "index": 0,
            "message": {"role": "assistant", "content": text},
            "finish_reason": finish,
            "stop_reason": None,
            "logprobs": None,
            "token_ids": ids if body.get("return_token_ids") else None,
        }
        if body.get("logprobs"):
            choice["logprobs"] = {
                "content": [
                    {"token": f"token_id:{t}", "logprob": lp, "bytes": None, "top_logprobs": []}
                    for t, lp in zip(ids, logprobs, strict=True)
                ]
            }
        reply: dict[str, Any] = {
            "id": f"chatcmpl-{self._replies}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", self.model_name),
            "choices": [choice],
            "usage": {
                "prompt_tokens": len(prompt_ids),
                "completion_tokens": len(ids),
                "total_tokens": len(prompt_ids) + len(ids),
            },
        }
        if body.get("return_token_ids"):
            reply["prompt_token_ids"] = prompt_ids
        return reply


def _pick(logprobs: Any, temperature: float, top_p: float, generator: Any) -> int:
    import torch

    if temperature <= 0:
        return int(torch.argmax(logprobs))
    probs = torch.softmax(logprobs / temperature, dim=-1)
    if top_p < 1.0:
        ordered, order = torch.sort(probs, descending=True)
        keep = torch.cumsum(ordered, dim=-1) - ordered < top_p
        filtered = torch.zeros_like(probs)
        filtered[order[keep]] = ordered[keep]
        probs = filtered / filtered.sum()
    return int(torch.multinomial(probs, 1, generator=generator))
