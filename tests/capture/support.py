"""Shared by the capture tests: ``versioned_upstream``, an upstream whose replies say which
weights version sampled them, as ``benchmax train``'s sampler does (the token mock behind a
small aiohttp server that adds ``weights_version``, 0, 1, 2, ... in call order, to each
successful reply); and ``non_loopback_address``, this machine's address on a network."""

from __future__ import annotations

import itertools
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import aiohttp
from aiohttp import web

from benchmax.testing import MockModelServer, Policy


@asynccontextmanager
async def versioned_upstream(policy: Policy) -> AsyncIterator[str]:
    """Serve ``policy`` (token mode) with ``weights_version`` in each reply; the base URL."""
    async with MockModelServer(policy, tokens=True) as mock:
        versions = itertools.count()
        async with aiohttp.ClientSession() as client:

            async def forward(request: web.Request) -> web.Response:
                url = mock.base_url + request.path.removeprefix("/v1")
                if request.method == "GET":
                    async with client.get(url) as reply:
                        return web.json_response(await reply.json(), status=reply.status)
                async with client.post(url, json=await request.json()) as reply:
                    body = await reply.json()
                if reply.status == 200:
                    body["weights_version"] = next(versions)
                return web.json_response(body, status=reply.status)

            app = web.Application()
            app.router.add_route("*", "/v1/{tail:.*}", forward)
            runner = web.AppRunner(app)
            await runner.setup()
            site = web.TCPSite(runner, "127.0.0.1", 0)
            await site.start()
            try:
                yield f"http://127.0.0.1:{runner.addresses[0][1]}/v1"
            finally:
                await runner.cleanup()


def non_loopback_address() -> str | None:
    """An IPv4 address of this machine other than loopback (the one a route to a
    documentation network would leave from; no packet is sent), or ``None``."""
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        probe.connect(("192.0.2.1", 9))
        address = str(probe.getsockname()[0])
    except OSError:
        return None
    finally:
        probe.close()
    return None if address.startswith("127.") or address == "0.0.0.0" else address
