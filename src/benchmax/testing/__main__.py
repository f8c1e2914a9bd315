"""``python -m benchmax.testing``: run the mock model server until interrupted."""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from collections.abc import Sequence

from benchmax.testing._policies import load_policy
from benchmax.testing._server import MockModelServer


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m benchmax.testing",
        description="Serve an OpenAI-compatible mock chat-completions API on 127.0.0.1.",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=0, help="port (default 0: any free port)")
    parser.add_argument(
        "--policy",
        default="echo",
        help="echo, tool_exerciser, package.module:function or path/to/file.py:function",
    )
    parser.add_argument(
        "--tokens",
        action="store_true",
        help="token mode: vLLM-shaped replies with toy token ids and logprobs on request",
    )
    parser.add_argument(
        "--chat-template",
        choices=("chatml", "qwen3"),
        default="chatml",
        help="token mode's chat template (qwen3 drops earlier reasoning)",
    )
    parser.add_argument(
        "--no-record",
        action="store_true",
        help="do not keep request records (for long benchmark runs)",
    )
    return parser


async def serve(server: MockModelServer) -> None:
    """Start ``server``, print its base URL on stdout, serve until cancelled."""
    task = asyncio.current_task()
    loop = asyncio.get_running_loop()
    if task is not None:
        loop.add_signal_handler(signal.SIGTERM, task.cancel)
    try:
        async with server:
            print(f"mock model server listening on {server.base_url}", flush=True)
            await server.serve_forever()
    except asyncio.CancelledError:
        pass
    finally:
        loop.remove_signal_handler(signal.SIGTERM)


def main(argv: Sequence[str] | None = None) -> int:
    arguments = _parser().parse_args(argv)
    try:
        policy = load_policy(arguments.policy)
        server = MockModelServer(
            policy,
            host=arguments.host,
            port=arguments.port,
            record=not arguments.no_record,
            tokens=arguments.tokens,
            chat_template=arguments.chat_template,
        )
    except (ValueError, TypeError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    try:
        asyncio.run(serve(server))
    except KeyboardInterrupt:
        pass
    except OSError as error:
        print(f"error: cannot serve on {arguments.host}:{arguments.port}: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
