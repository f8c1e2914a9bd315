"""A credential written into a base URL (``https://user:PASSWORD@host/v1``).

The README documents it as the alternative to ``--api-key-env``. It is taken out of the
URL before anything is sent (aiohttp refuses a URL credential beside an ``Authorization``
header, and a URL can reach logs and error messages) and sent the way curl, httpx and
requests send URL credentials: HTTP Basic (RFC 7617), ``Authorization: Basic
base64(user:password)``, user and password percent-decoded (RFC 3986) and UTF-8 encoded. A
user without a password (``https://TOKEN@host``) is sent with an empty password. Every
model call path uses it: ``BaseEnv`` chat calls, judges, simulated users, the ``traces``
teacher and the judge check. The credential is a secret everywhere else: reprs of the
records that hold a base URL show it as ``user:***@`` (:func:`masked_url`), and
:func:`url_secrets` gives what to mask in text.

A leaf module (standard library only), below every layer.
"""

from __future__ import annotations

import base64
import dataclasses
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

__all__ = [
    "UrlCredential",
    "masked_url",
    "repr_masking_urls",
    "split_url_credential",
    "url_secrets",
    "with_url_credential",
]


@dataclass(frozen=True, slots=True)
class UrlCredential:
    """The ``Authorization`` value a base URL's ``user:password@`` stands for (hidden from
    ``repr``) and the password alone, percent-decoded (a secret to mask)."""

    authorization: str = field(repr=False)
    password: str = field(repr=False)

    def __repr__(self) -> str:
        return "UrlCredential('***')"


def split_url_credential(url: str) -> tuple[str, UrlCredential | None]:
    """``url`` without its ``user:password@`` part, and the credential that part gave
    (``None``: the URL carries none, or it does not parse as a URL; the HTTP client then
    says what is wrong with it). The rest of the URL is kept exactly as written."""
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:
        return url, None
    if "@" not in parts.netloc:
        return url, None
    user = urllib.parse.unquote(parts.username or "")
    password = urllib.parse.unquote(parts.password or "")
    host = parts.netloc.rpartition("@")[2]
    head, separator, rest = url.partition("//")
    if rest.startswith(parts.netloc):
        stripped = head + separator + host + rest[len(parts.netloc) :]
    else:  # urlsplit dropped characters (tabs, newlines): rebuild from its parts
        stripped = urllib.parse.urlunsplit(parts._replace(netloc=host))
    if not user and not password:  # ``https://@host`` or ``https://:@host``: nothing given
        return stripped, None
    token = base64.b64encode(f"{user}:{password}".encode()).decode("ascii")
    return stripped, UrlCredential(authorization=f"Basic {token}", password=password)


def with_url_credential[V](
    headers: Mapping[str, V], credential: UrlCredential
) -> dict[str, V | str]:
    """``headers`` plus the URL credential's ``Authorization``.

    Raises ``ValueError`` (naming neither value) when ``headers`` carry an
    ``Authorization`` of their own: a request has one, so one of the two credentials
    would be dropped without a word.
    """
    if any(isinstance(name, str) and name.lower() == "authorization" for name in headers):
        raise ValueError(
            "the base URL carries a user:password credential and the model auth gives an "
            "Authorization header too; a request has one, so keep the credential in one of them"
        )
    return {**headers, "Authorization": credential.authorization}


def _userinfo(url: str) -> tuple[str, str | None, str] | None:
    """``(user, password, userinfo as written)`` of ``url``, or ``None`` without any."""
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:
        return None
    if "@" not in parts.netloc:
        return None
    userinfo = parts.netloc.rpartition("@")[0]
    user, colon, password = userinfo.partition(":")
    return user, password if colon else None, userinfo


def masked_url(url: str) -> str:
    """``url`` with its credential replaced by ``***``: ``https://user:***@host/v1``, or
    ``https://***@host/v1`` when the user part is all there is (a token); unchanged when
    it carries none."""
    found = _userinfo(url)
    if found is None:
        return url
    user, password, userinfo = found
    if password:
        shown = f"{user}:***"
    elif user:
        shown = "***"
    else:
        return url
    return url.replace(f"{userinfo}@", f"{shown}@", 1)


def url_secrets(url: str) -> tuple[str, ...]:
    """What to mask of ``url``'s credential: the password (or the user when there is no
    password, ``https://TOKEN@host``) as written and percent-decoded, and the base64
    token of the Basic ``Authorization`` it is sent as (a server may echo the header);
    ``()`` without a credential."""
    found = _userinfo(url)
    _, credential = split_url_credential(url)
    if found is None or credential is None:
        return ()
    user, password, _ = found
    secret = password or user
    decoded = urllib.parse.unquote(secret)
    token = credential.authorization.partition(" ")[2]
    return tuple(dict.fromkeys((secret, decoded, token)))


def repr_masking_urls(instance: DataclassInstance, *names: str) -> str:
    """The dataclass repr of ``instance`` (fields with ``repr=True``, in order), with the
    string fields ``names`` shown through :func:`masked_url`."""
    shown = []
    for item in dataclasses.fields(instance):
        if not item.repr:
            continue
        value = getattr(instance, item.name)
        if item.name in names and isinstance(value, str):
            value = masked_url(value)
        shown.append(f"{item.name}={value!r}")
    return f"{type(instance).__qualname__}({', '.join(shown)})"
