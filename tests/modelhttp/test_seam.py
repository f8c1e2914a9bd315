"""``benchmax._modelhttp`` is the one model-HTTP seam: its ``__init__`` is the interface."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest
from aiohttp import web

from benchmax import _modelhttp
from benchmax._modelhttp import ModelsUnreachable, get_models
from benchmax.testing import MockModelServer

SRC = Path(__file__).resolve().parents[2] / "src" / "benchmax"

HTTP_LIBRARIES = {
    # aiohttp's web server (never its client): the server side of ``benchmax serve`` and the
    # embedded sampler's OpenAI-compatible endpoint (the capture endpoint serves on its own)
    "aiohttp": {
        "serving/_bridge.py",
        "serving/_server.py",
        "serving/_nemo_gym.py",
        "serving/_openenv.py",
        "serving/_websocket.py",
        "serving/_wire.py",
        "training/_sampler.py",
    },
    # the SDK's httpx.Auth twin (0.2's _RequestModelAuth); an OpenEnv environment's own HTTP
    # routes (not a model call)
    "httpx": {"rewards/judge.py", "sources/_openenv_session.py"},
    "httpx2": {"tools/_mcp_connection.py"},  # MCP's own transport (the SDK's client)
    "openai": {"rewards/judge.py", "envs/base/openai_types.py"},  # the judge's SDK; types
}
"""Who, outside ``_modelhttp``, may import an HTTP client library, and why."""


def imports(path: Path) -> list[str]:
    names: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
    return names


def outside_the_seam() -> list[Path]:
    return [p for p in SRC.rglob("*.py") if "_modelhttp" not in p.relative_to(SRC).parts]


def test_no_module_outside_the_seam_imports_its_submodules() -> None:
    found = [
        f"{path.relative_to(SRC)}: {name}"
        for path in outside_the_seam()
        for name in imports(path)
        if name.startswith("benchmax._modelhttp.")
    ]
    assert found == []


def test_http_client_libraries_are_imported_only_where_declared() -> None:
    found = {
        (library, str(path.relative_to(SRC)))
        for path in outside_the_seam()
        for name in imports(path)
        for library in HTTP_LIBRARIES
        if name == library or name.startswith(f"{library}.")
    }
    allowed = {(library, where) for library, places in HTTP_LIBRARIES.items() for where in places}
    assert found <= allowed, sorted(found - allowed)


def test_every_exported_name_resolves_and_heavy_ones_load_on_first_use() -> None:
    for name in _modelhttp.__all__:
        assert getattr(_modelhttp, name) is not None, name
    with pytest.raises(AttributeError, match="no attribute 'missing'"):
        _modelhttp.missing  # noqa: B018
    code = (
        "import sys, benchmax._modelhttp as m, benchmax.envs\n"
        "assert 'aiohttp' not in sys.modules\n"
        "m.ChatSession\n"
        "assert 'aiohttp' in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


async def test_get_models_answers_with_any_status(mock_server: MockModelServer) -> None:
    answer = await get_models(mock_server.base_url, {"Authorization": "Bearer k"})
    assert answer.status == 200 and "data" in answer.json()

    async def refuse(request: web.Request) -> web.Response:
        return web.Response(status=401, text="  bad\n key ")

    refusing = web.Application()
    refusing.router.add_get("/v1/models", refuse)
    runner = web.AppRunner(refusing)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        refused = await get_models(f"http://127.0.0.1:{port}/v1/", {})
    finally:
        await runner.cleanup()
    assert (refused.status, refused.excerpt()) == (401, "bad key")


async def test_get_models_says_why_no_answer_came() -> None:
    with pytest.raises(ModelsUnreachable) as caught:
        await get_models("http://127.0.0.1:9/v1", {})
    assert type(caught.value.error).__name__ == "ConnectError"
    with pytest.raises(ModelsUnreachable):
        await get_models("not a url", {})
    with pytest.raises(ModelsUnreachable):
        await get_models("http://127.0.0.1:9/v1", {"Authorization": "Bearer k\n"})
