"""The package docstring is user documentation: its examples must run as written."""

from __future__ import annotations

import asyncio
import socket
import textwrap

import httpx
import pytest

import benchmax.testing


def _code_blocks(doc: str) -> list[str]:
    """The reST literal blocks (after a line ending in ``::``), dedented."""
    blocks: list[str] = []
    lines = doc.splitlines()
    for index, line in enumerate(lines):
        if not line.rstrip().endswith("::"):
            continue
        body: list[str] = []
        for following in lines[index + 1 :]:
            if following.strip() and not following.startswith(" "):
                break
            body.append(following)
        blocks.append(textwrap.dedent("\n".join(body)).strip() + "\n")
    return blocks


@pytest.fixture
def unused_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_docstring_has_the_two_examples() -> None:
    blocks = _code_blocks(benchmax.testing.__doc__ or "")
    assert len(blocks) == 2
    assert "async def main():" in blocks[0]


def test_environment_example_runs_as_written() -> None:
    [example, _] = _code_blocks(benchmax.testing.__doc__ or "")
    namespace: dict[str, object] = {"__name__": "docs_example"}
    exec(compile(example, "benchmax.testing docstring", "exec"), namespace)
    asyncio.run(namespace["main"]())  # type: ignore[operator]


async def test_standalone_example_runs_as_written(unused_port: int) -> None:
    [_, example] = _code_blocks(benchmax.testing.__doc__ or "")
    source = example.replace("port=8000", f"port={unused_port}")
    body = textwrap.indent(source, "    ")
    namespace: dict[str, object] = {}
    exec(
        f"from benchmax.testing import MockModelServer, load_policy\nasync def serve():\n{body}",
        namespace,
    )
    task = asyncio.create_task(namespace["serve"]())  # type: ignore[operator]
    url = f"http://127.0.0.1:{unused_port}/v1/chat/completions"
    async with httpx.AsyncClient() as client:
        for _ in range(3000):  # a minute for the server to start on a busy machine
            try:
                response = await client.post(
                    url, json={"messages": [{"role": "user", "content": "doc"}]}
                )
                break
            except httpx.ConnectError:
                await asyncio.sleep(0.02)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert response.json()["choices"][0]["message"]["content"] == "doc"
