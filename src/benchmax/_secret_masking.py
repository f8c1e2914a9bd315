"""Known credentials, masked in text and in everything the process prints.

Every credential benchmax resolves (a bearer key read from an environment variable, the
password of a URL it was given) is remembered here (``remember``). ``mask_secrets``
replaces secrets in one text; ``masked_output`` wraps ``sys.stdout`` and ``sys.stderr`` so
that what anything in the process prints through them (user code's ``print``, log
handlers, tracebacks, a progress bar) has every remembered secret replaced by ``***``. The
CLI wraps them for each command and Ray workers for their lifetime (Ray writes what a
worker prints to its session logs and forwards it to the driver's terminal).

Output written to the file descriptors directly (a subprocess's inherited stderr) is not
seen here.

``credential_secrets`` collects the strings to hide (bearer tokens, a URL's password) and
remembers them; the runner, the group pipeline's log capture, validation and the CLI all mask
through ``mask_secrets``. ``MaskedRecords`` encodes records with every secret masked in their
strings: the results files and every record ``benchmax serve`` sends go through it.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import sys
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, BinaryIO, TextIO
from urllib.parse import urlsplit

from benchmax._url_credentials import url_secrets
from benchmax.auth import ModelAuth, StaticBearerAuth

__all__ = [
    "MIN_MASKED_LENGTH",
    "MaskedRecords",
    "MaskingStream",
    "credential_secrets",
    "mask_secrets",
    "mask_standard_streams",
    "mask_strings",
    "masked_output",
    "remember",
    "remembered",
    "url_passwords",
]

MIN_MASKED_LENGTH = 8
"""Secrets shorter than this (placeholder keys such as ``x``, ``1``, ``EMPTY``) are never
masked inside other text: replacing them would corrupt transcripts and field names
(``Let x = 1``, ``prompt_tokens``). Only a value that is exactly such a secret is masked."""

_REMEMBERED: dict[str, None] = {}
_ORDERED: tuple[str, ...] = ()
_URL_WITH_PASSWORD = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s/@?#\"']*:[^\s/@?#\"']+@[^\s\"']+")


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


def mask_strings(value: Any, secrets: tuple[str, ...]) -> Any:
    """``value`` (JSON-like data) with every secret masked in each string it holds, keys
    included (``mask_secrets`` on each); other values are kept as they are."""
    if isinstance(value, str):
        return mask_secrets(value, secrets)
    if isinstance(value, Mapping):
        return {
            mask_strings(key, secrets): mask_strings(item, secrets) for key, item in value.items()
        }
    if isinstance(value, list | tuple):
        return [mask_strings(item, secrets) for item in value]
    return value


class MaskedRecords:
    """Encodes records that leave the process with ``secrets`` masked in every string.

    ``encoded(record, encode)`` is ``encode(record)`` (JSON bytes) when no secret occurs
    in it as JSON writes it, else ``encode`` of the record with every string masked
    (``mask_strings``): the record is only walked when a secret is there. The results
    files (``benchmax run``) and every reply of ``benchmax serve`` are encoded here.
    """

    def __init__(self, secrets: Iterable[str]) -> None:
        self.secrets = tuple(dict.fromkeys(s for s in secrets if s))
        self._as_written = tuple(
            json.dumps(s, ensure_ascii=False)[1:-1].encode("utf-8", "backslashreplace")
            for s in self.secrets
        )

    def encoded(self, record: Any, encode: Callable[[Any], bytes]) -> bytes:
        """``encode(record)`` with every secret masked (see the class)."""
        data = encode(record)
        if any(secret in data for secret in self._as_written):
            data = encode(mask_strings(record, self.secrets))
        return data


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
    secrets = tuple(t for t in (*tokens, *url_secrets(base_url or "")) if t)
    remember(*secrets)
    if warn and any(len(secret) < MIN_MASKED_LENGTH for secret in secrets):
        warnings.warn(
            f"a credential shorter than {MIN_MASKED_LENGTH} characters (a placeholder key?)"
            " cannot be masked in what is recorded or printed: masking it would corrupt"
            " ordinary text; only a value that is exactly the key is masked",
            UserWarning,
            stacklevel=1,
        )
    return secrets


def remember(*secrets: str) -> None:
    """Add ``secrets`` to the ones masked in this process's output (empty ones ignored)."""
    global _ORDERED
    for secret in secrets:
        if isinstance(secret, str) and secret and secret not in _REMEMBERED:
            _REMEMBERED[secret] = None
            _ORDERED = tuple(sorted(_REMEMBERED, key=len, reverse=True))


def remembered() -> tuple[str, ...]:
    """The secrets remembered so far, longest first (so a secret inside another is not
    masked first, leaving part of the longer one)."""
    return _ORDERED


def url_passwords(value: object) -> tuple[str, ...]:
    """The passwords of the URLs (``scheme://user:PASSWORD@host``) in the strings that
    ``value`` (JSON-like data: strings, mappings, sequences) holds."""
    found: dict[str, None] = {}
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if "@" in item and "://" in item:
                for match in _URL_WITH_PASSWORD.finditer(item):
                    try:
                        password = urlsplit(match.group()).password
                    except ValueError:
                        continue
                    if password:
                        found[password] = None
        elif isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)
    return tuple(found)


class MaskingStream(io.TextIOBase):
    """A text stream writing to ``stream`` with the remembered secrets masked (each
    ``write`` on its own: ``print`` hands over whole values). Other attributes (``isatty``,
    ``fileno``, ``encoding``...) are the wrapped stream's; ``buffer`` masks bytes alike."""

    def __init__(self, stream: TextIO) -> None:
        super().__init__()
        self.wrapped = stream

    def write(self, text: str) -> int:
        if _REMEMBERED and isinstance(text, str):
            masked = mask_secrets(text, remembered())
            self.wrapped.write(masked)
        else:
            self.wrapped.write(text)
        return len(text)

    def writelines(self, lines: Iterable[str]) -> None:  # type: ignore[override]
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        self.wrapped.flush()

    def isatty(self) -> bool:
        return self.wrapped.isatty()

    def fileno(self) -> int:
        return self.wrapped.fileno()

    def writable(self) -> bool:
        return True

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return str(getattr(self.wrapped, "encoding", None) or "utf-8")

    @property
    def errors(self) -> str | None:  # type: ignore[override]
        return getattr(self.wrapped, "errors", None)

    @property
    def buffer(self) -> _MaskingBuffer | None:
        inner = getattr(self.wrapped, "buffer", None)
        return None if inner is None else _MaskingBuffer(inner, self.encoding)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.wrapped, name)


class _MaskingBuffer:
    """The binary side of a ``MaskingStream``: secrets masked in their encoded form."""

    def __init__(self, buffer: BinaryIO, encoding: str) -> None:
        self._buffer = buffer
        self._encoding = encoding

    def write(self, data: bytes) -> int:
        masked = bytes(data)
        for secret in remembered():
            if len(secret) >= MIN_MASKED_LENGTH:
                encoded = secret.encode(self._encoding, "replace")
                masked = masked.replace(encoded, b"***")
        self._buffer.write(masked)
        return len(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._buffer, name)


def mask_standard_streams() -> None:
    """Wrap ``sys.stdout`` and ``sys.stderr`` in ``MaskingStream`` for the rest of the
    process (a stream already wrapped is left as it is)."""
    if sys.stdout is not None and not isinstance(sys.stdout, MaskingStream):
        sys.stdout = MaskingStream(sys.stdout)
    if sys.stderr is not None and not isinstance(sys.stderr, MaskingStream):
        sys.stderr = MaskingStream(sys.stderr)


@contextlib.contextmanager
def masked_output() -> Iterator[None]:
    """``mask_standard_streams`` for the block; the streams of before are put back after."""
    saved = sys.stdout, sys.stderr
    mask_standard_streams()
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved
