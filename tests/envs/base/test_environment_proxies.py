"""Which proxy a model call takes, by the environment (benchmax._modelhttp.connections)."""

from __future__ import annotations

import pytest

from benchmax._modelhttp.connections import _EnvironmentProxies

PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "REQUEST_METHOD")


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)


def test_no_proxy_variables_mean_direct() -> None:
    assert _EnvironmentProxies().for_url("https://api.example.com/v1/chat/completions") is None


def test_per_scheme_proxies_and_all_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://secure-proxy:3128")
    monkeypatch.setenv("ALL_PROXY", "http://any-proxy:3128")
    proxies = _EnvironmentProxies()
    assert proxies.for_url("https://api.example.com/v1/x") == "http://secure-proxy:3128"
    assert proxies.for_url("http://api.example.com/v1/x") == "http://any-proxy:3128"


@pytest.mark.parametrize(
    ("no_proxy", "url", "direct"),
    [
        ("example.com", "https://api.example.com/v1", True),  # a domain suffix
        (".example.com", "https://api.example.com/v1", True),
        ("example.com", "https://example.org/v1", False),
        ("*", "https://anything.test/v1", True),
        ("10.0.0.5:8000", "http://10.0.0.5:8000/v1", True),
        ("10.0.0.5:8000", "http://10.0.0.5:9000/v1", False),
        ("localhost, 127.0.0.1", "http://127.0.0.1:9/v1", True),
    ],
)
def test_no_proxy_rules(
    monkeypatch: pytest.MonkeyPatch, no_proxy: str, url: str, direct: bool
) -> None:
    monkeypatch.setenv("HTTP_PROXY", "http://proxy:3128")
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy:3128")
    monkeypatch.setenv("NO_PROXY", no_proxy)
    assert (_EnvironmentProxies().for_url(url) is None) is direct


def test_the_environment_is_read_once(monkeypatch: pytest.MonkeyPatch) -> None:
    proxies = _EnvironmentProxies()
    monkeypatch.setenv("HTTPS_PROXY", "http://late:3128")
    assert proxies.for_url("https://api.example.com/v1") is None  # a new pool (loop) reads it
    assert _EnvironmentProxies().for_url("https://api.example.com/v1") == "http://late:3128"


def test_an_unparsable_url_goes_direct_and_fails_there(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTP_PROXY", "http://proxy:3128")
    assert _EnvironmentProxies().for_url("http://[::1/v1/chat/completions") is None
