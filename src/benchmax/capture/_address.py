"""Where a capture endpoint listens, and the host its URLs name.

By default the endpoint listens on 127.0.0.1 and hands programs ``http://127.0.0.1:PORT``
URLs. An agent in a Docker container cannot reach the host's loopback, so a
``CaptureAddress`` can bind another local address (``0.0.0.0``, or the docker bridge's
gateway such as ``172.17.0.1``) and advertise another host in the URLs
(``host.docker.internal``, the gateway address). Beyond loopback the endpoint is
reachable by whatever can reach that address: each rollout's random API key is then the
only guard (docs/agents.md).
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from typing import Final

__all__ = ["CaptureAddress", "check_advertised_host", "is_loopback", "is_wildcard"]

_HOST_NAME: Final = re.compile(
    r"(?=.{1,253}$)[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?"
    r"(?:\.[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?)*\.?"
)
_EXAMPLES: Final = "'host.docker.internal' or the docker bridge gateway '172.17.0.1'"


@dataclass(frozen=True, slots=True)
class CaptureAddress:
    """Where the capture endpoint listens (``bind``: an IP address of this machine,
    ``127.0.0.1`` by default, ``0.0.0.0``/``::`` for every interface) and the host put in
    the base URLs programs are given (``host``: a host name or IP address the program
    reaches this machine by; ``None``: ``bind`` itself). ``TypeError``/``ValueError``,
    naming ``capture_bind`` or ``capture_host``, for an address that is not one, a host
    with a scheme, port or path, or a wildcard ``bind`` without a ``host`` (a wildcard
    cannot be called)."""

    bind: str = "127.0.0.1"
    host: str | None = None

    def __post_init__(self) -> None:
        bind: object = self.bind
        if not isinstance(bind, str):
            raise TypeError(f"capture_bind must be an IP address string, not {bind!r}")
        try:
            address = ipaddress.ip_address(bind)
        except ValueError:
            raise ValueError(
                "capture_bind must be an IP address of this machine to listen on, such as"
                f" '127.0.0.1', '0.0.0.0' or the docker bridge gateway '172.17.0.1'; got {bind!r}"
            ) from None
        if self.host is not None:
            check_advertised_host(self.host, "capture_host")
        elif address.is_unspecified:
            raise ValueError(
                f"capture_bind {bind!r} listens on every interface but is no address a program"
                f" can call: set capture_host to the host the agent reaches this machine by,"
                f" such as {_EXAMPLES}"
            )

    @property
    def advertised(self) -> str:
        """The host the base URLs name."""
        return self.bind if self.host is None else self.host

    @property
    def exposed(self) -> bool:
        """Whether the endpoint listens beyond this machine's loopback."""
        return not is_loopback(self.bind)


def check_advertised_host(host: object, name: str) -> str:
    """``host`` when it is a host name or an IP address (``[...]`` around IPv6 allowed);
    ``TypeError``/``ValueError`` naming ``name`` otherwise (a URL, a port, a path)."""
    if not isinstance(host, str):
        raise TypeError(f"{name} must be a host name or IP address string, not {host!r}")
    bare = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    try:
        address = ipaddress.ip_address(bare)
    except ValueError:
        if bare is host and _HOST_NAME.fullmatch(host):
            return host
        raise ValueError(
            f"{name} must be a host name or IP address the agent reaches this machine by,"
            f" without scheme, port or path, such as {_EXAMPLES}; got {host!r}"
        ) from None
    if address.is_unspecified:
        raise ValueError(
            f"{name} {host!r} is a wildcard, not an address a program can call: use the host"
            f" the agent reaches this machine by, such as {_EXAMPLES}"
        )
    return host


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address, or ``localhost``) is this machine's loopback."""
    if host.lower() in ("localhost", "localhost."):
        return True
    address = _ip_address(host)
    return address is not None and address.is_loopback


def is_wildcard(host: str) -> bool:
    """Whether ``host`` is the every-interface bind (``0.0.0.0``, ``::``), which no
    program can call."""
    address = _ip_address(host)
    return address is not None and address.is_unspecified


def _ip_address(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """``host`` as an IP address (``[...]`` around IPv6 allowed); ``None`` for a name."""
    bare = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    try:
        return ipaddress.ip_address(bare)
    except ValueError:
        return None
