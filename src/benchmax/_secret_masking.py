"""Masking credentials in what is recorded or printed (below every layer that records).

``credential_secrets`` collects the strings to hide (bearer tokens, a URL's password);
``mask_secrets`` replaces them in a text. The runner, the group pipeline's log capture,
validation and the CLI all mask through these two functions.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable
from urllib.parse import urlsplit

from benchmax.auth import ModelAuth, StaticBearerAuth

__all__ = [
    "MIN_MASKED_LENGTH",
    "credential_secrets",
    "mask_secrets",
    "masked_url",
    "url_password",
]

MIN_MASKED_LENGTH = 8
"""Secrets shorter than this (placeholder keys such as ``x``, ``1``, ``EMPTY``) are never
masked inside other text: replacing them would corrupt transcripts and field names
(``Let x = 1``, ``prompt_tokens``). Only a value that is exactly such a secret is masked."""


def credential_secrets(
    auths: Iterable[ModelAuth], base_url: str | None, *, warn: bool = True
) -> tuple[str, ...]:
    """The bearer tokens of ``auths`` and the password in ``base_url`` (if any), non-empty:
    the strings to mask in what is recorded or printed.

    Warns (``UserWarning``, once per process by Python's default warning filter) when one
    is shorter than :data:`MIN_MASKED_LENGTH` characters, as it cannot be masked (unless
    ``warn`` is false).
    """
    tokens = [auth.token for auth in auths if isinstance(auth, StaticBearerAuth)]
    secrets = tuple(t for t in (*tokens, url_password(base_url or "")) if t)
    if warn and any(len(secret) < MIN_MASKED_LENGTH for secret in secrets):
        warnings.warn(
            f"a credential shorter than {MIN_MASKED_LENGTH} characters (a placeholder key?)"
            " cannot be masked in what is recorded or printed: masking it would corrupt"
            " ordinary text; only a value that is exactly the key is masked",
            UserWarning,
            stacklevel=1,
        )
    return secrets


def mask_secrets(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every (non-empty) secret replaced by ``***``.

    A secret shorter than :data:`MIN_MASKED_LENGTH` characters is masked only when it
    is the whole of ``text``, never as a substring.
    """
    original = text
    for secret in secrets:
        if not secret:
            continue
        if len(secret) >= MIN_MASKED_LENGTH:
            text = text.replace(secret, "***")
        elif original == secret:
            return "***"
    return text


def url_password(url: str) -> str | None:
    """The password of ``url`` (``https://user:PASSWORD@host``), ``None`` when it has none
    or is not a URL."""
    try:
        return urlsplit(url).password
    except ValueError:
        return None


def masked_url(url: str) -> str:
    """``url`` with its password (``https://user:PASSWORD@host``), if any, shown as ``***``."""
    password = url_password(url)
    return url.replace(f":{password}@", ":***@", 1) if password else url
