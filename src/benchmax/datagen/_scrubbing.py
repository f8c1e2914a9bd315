"""Secret and personal-data scrubbing of logged text, with counts per kind.

Kinds, in the order they are replaced (each by a ``[KIND]`` marker):

* ``api_key``: PEM private-key blocks (``-----BEGIN ... PRIVATE KEY-----`` to its end,
  or to the end of its base64 when cut); provider keys by their published prefixes
  (OpenAI/Anthropic ``sk-``, AWS ``AKIA``/``ASIA``, GitHub ``ghp_``..., ``github_pat_``,
  Slack ``xox?-``, Google ``AIza``, Stripe ``sk_live_``..., Hugging Face ``hf_``); the
  password of a URL or DSN (``postgres://user:PASSWORD@host``); the value of a secret
  query parameter (``?key=``, ``&token=``, ``&sig=``, ``access_token``...); and the value
  (6+ characters) of an assignment ``NAME=value`` / ``NAME: value`` whose name ends in
  a secret word, environment style included (``api_key``, ``x-api-key``, ``secret``,
  ``client_secret``, ``secret_key``, ``AWS_SECRET_ACCESS_KEY``, ``password``,
  ``DB_PASSWORD``, ``PGPASSWORD``, ``passwd``, ``pwd``, ``passphrase``, ``token``,
  ``GITHUB_TOKEN``, ``access_token``, ``private_key``, ``credentials``; not
  ``max_tokens``);
* ``bearer_token``: the token after ``Bearer``, the credentials of an ``Authorization:``
  header of another scheme (``Basic``, ``Token``, ``Digest``...) and JSON Web Tokens;
* ``email``: addresses;
* ``card``: 13 to 19 digits (spaces or dashes between) that pass the Luhn check
  (ISO/IEC 7812-1 Annex B);
* ``phone``: numbers that Google's libphonenumber (the ``phonenumbers`` package) finds
  valid, national numbers read in ``phone_region``.

A message's text parts are also scrubbed joined, so a key split across two parts is found;
such parts are then merged into one (the first's place). Identifiers that hold personal
data (an e-mail used as a conversation id or user) are written as pseudonyms
(``pseudonym``): ``[EMAIL]#1``, ``[EMAIL]#2``... numbered in order of appearance, so rows of
one conversation still share their id.

Secret scanners built for repositories (detect-secrets, last released 2024) scan files
line by line behind global settings; this module keeps a few precompiled patterns so a
gigabyte of log text is scrubbed at regex speed, and uses a library where rules are
hard (phone numbers).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping
from typing import Final, TypeGuard

import phonenumbers

from benchmax._message_content import TextPart

__all__ = ["SCRUB_KINDS", "Scrubber", "luhn_valid"]

SCRUB_KINDS: Final = ("api_key", "bearer_token", "email", "card", "phone")

_KEY_PATTERNS: Final = tuple(
    (prefix, re.compile(rf"{prefix}(?<![A-Za-z0-9]{prefix}){rest}"))
    for prefix, rest in (
        ("sk-", r"[A-Za-z0-9_-]{20,}"),
        ("AKIA", r"[0-9A-Z]{16}"),
        ("ASIA", r"[0-9A-Z]{16}"),
        ("ghp_", r"[A-Za-z0-9]{30,}"),
        ("gho_", r"[A-Za-z0-9]{30,}"),
        ("ghu_", r"[A-Za-z0-9]{30,}"),
        ("ghs_", r"[A-Za-z0-9]{30,}"),
        ("ghr_", r"[A-Za-z0-9]{30,}"),
        ("github_pat_", r"[A-Za-z0-9_]{22,}"),
        ("xox", r"[abprs]-[A-Za-z0-9-]{10,}"),
        ("AIza", r"[0-9A-Za-z_-]{35}"),
        ("sk_live_", r"[A-Za-z0-9]{16,}"),
        ("sk_test_", r"[A-Za-z0-9]{16,}"),
        ("rk_live_", r"[A-Za-z0-9]{16,}"),
        ("hf_", r"[A-Za-z0-9]{30,}"),
    )
)
"""(literal prefix, pattern): a pattern runs only on text holding its prefix."""
_SECRET_NAME: Final = (
    r"[A-Za-z0-9_.-]*?(?:api[_-]?key|apikey|secret(?:[_-]?access)?(?:[_-]?key)?|"
    r"access[_-]?key|private[_-]?key|password|passwd|pwd|passphrase|token|credentials?)"
)
_ASSIGNED_SECRET = re.compile(
    rf"(?i)((?<![A-Za-z0-9]){_SECRET_NAME}(?![A-Za-z0-9])[\"']?\s*[:=]\s*[\"']?)"
    r"([^\s\"',;}{&]{6,})"
)
_PEM_KEY = re.compile(
    r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----"
    r"(?:[\s\S]*?-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|[A-Za-z0-9+/=\s\\:,-]*)"
)
_URL_PASSWORD = re.compile(r"(?i)(\b[a-z][a-z0-9+.-]*://[^\s:/@?#\"']*:)([^\s@/?#\"']+)(?=@)")
_QUERY_SECRET = re.compile(
    r"(?i)([?&](?:key|api[_-]?key|apikey|token|access[_-]?token|auth|sig|signature|secret|"
    r"client[_-]?secret|password|code)=)([^&\s#\"']{4,})"
)
_AUTHORIZATION = re.compile(
    r"(?i)(\bauthorization[\"']?\s*[:=]\s*[\"']?(?:basic|token|digest|negotiate|apikey)\s+)"
    r"[A-Za-z0-9._~+/=-]{6,}"
)
_BEARER = re.compile(r"(?i)(\bbearer\s+)[A-Za-z0-9._~+/=-]{8,}")
_JWT = re.compile(r"\beyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}")
_EMAIL = re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}")
_CARD = re.compile(r"(?<![\d-])\d(?:[ -]?\d){12,18}(?![\d-])")
_MAYBE_PHONE = re.compile(r"\d(?:[\s().-]{0,2}\d){6}")
_NOT_DIGITS = bytes(byte for byte in range(256) if not 48 <= byte <= 57)
_SECRET_WORDS = ("key", "secret", "pass", "pwd", "token", "credential")
_SKIPPED_KEYS = frozenset({"role", "type", "id", "tool_call_id", "finish_reason"})


def _is_text_part(part: object) -> TypeGuard[TextPart]:
    return (
        isinstance(part, Mapping)
        and part.get("type") == "text"
        and isinstance(part.get("text"), str)
    )


def luhn_valid(digits: str) -> bool:
    """Whether the decimal string ``digits`` passes the Luhn mod-10 check."""
    total = 0
    for position, char in enumerate(reversed(digits)):
        value = ord(char) - 48
        if position % 2:
            value *= 2
            if value > 9:
                value -= 9
        total += value
    return total % 10 == 0


class Scrubber:
    """Replaces secrets and personal data in text; ``counts`` holds replacements by kind
    (every selected kind, zero until found).

    ``kinds`` selects what is scrubbed (default: all of ``SCRUB_KINDS``); phone numbers
    without a country code are read as numbers of ``phone_region`` (ISO 3166 alpha-2).
    Not thread-safe (the counter).
    """

    def __init__(self, kinds: tuple[str, ...] = SCRUB_KINDS, *, phone_region: str = "US") -> None:
        unknown = set(kinds) - set(SCRUB_KINDS)
        if unknown:
            raise ValueError(f"unknown scrub kind(s) {sorted(unknown)}; known: {SCRUB_KINDS}")
        self.kinds = frozenset(kinds)
        self.phone_region = phone_region.upper()
        self.counts: Counter[str] = Counter(dict.fromkeys(kinds, 0))
        self._pseudonyms: dict[str, str] = {}

    def text(self, text: str) -> str:
        """``text`` with every selected kind replaced by its marker."""
        if len(text) < 6:
            return text
        kinds, counts = self.kinds, self.counts
        assigns = "=" in text or ":" in text
        lower = text.lower() if (assigns or "earer" in text) else ""
        if "api_key" in kinds:
            if "PRIVATE KEY" in text:
                text, n = _PEM_KEY.subn("[API_KEY]", text)
                counts["api_key"] += n
            underscore = "_" in text
            for prefix, pattern in _KEY_PATTERNS:
                if (underscore or "_" not in prefix) and prefix in text:
                    text, n = pattern.subn("[API_KEY]", text)
                    counts["api_key"] += n
            if "://" in text and "@" in text:
                text, n = _URL_PASSWORD.subn(r"\1[API_KEY]", text)
                counts["api_key"] += n
            if "=" in text and ("?" in text or "&" in text):
                text, n = _QUERY_SECRET.subn(r"\1[API_KEY]", text)
                counts["api_key"] += n
            if assigns and any(word in lower for word in _SECRET_WORDS):
                text, n = _ASSIGNED_SECRET.subn(r"\1[API_KEY]", text)
                counts["api_key"] += n
        if "bearer_token" in kinds:
            if "bearer" in lower:  # (lower is empty unless "earer" is in the text)
                text, n = _BEARER.subn(r"\1[BEARER_TOKEN]", text)
                counts["bearer_token"] += n
            if assigns and "authorization" in lower:
                text, n = _AUTHORIZATION.subn(r"\1[BEARER_TOKEN]", text)
                counts["bearer_token"] += n
            if "eyJ" in text:
                text, n = _JWT.subn("[BEARER_TOKEN]", text)
                counts["bearer_token"] += n
        if "email" in kinds and "@" in text:
            text, n = _EMAIL.subn("[EMAIL]", text)
            counts["email"] += n
        if (
            ("card" in kinds or "phone" in kinds)
            and len(text.encode("utf-8", "surrogatepass").translate(None, _NOT_DIGITS)) >= 7
            and _MAYBE_PHONE.search(text)
        ):
            if "card" in kinds:
                text = _CARD.sub(self._card, text)
            if "phone" in kinds:
                text = self._phones(text)
        return text

    def _card(self, match: re.Match[str]) -> str:
        digits = match.group().replace(" ", "").replace("-", "")
        if luhn_valid(digits):
            self.counts["card"] += 1
            return "[CARD]"
        return match.group()

    def _phones(self, text: str) -> str:
        found = list(phonenumbers.PhoneNumberMatcher(text, self.phone_region))
        if not found:
            return text
        pieces: list[str] = []
        last = 0
        for match in found:
            pieces.append(text[last : match.start])
            pieces.append("[PHONE]")
            last = match.end
        pieces.append(text[last:])
        self.counts["phone"] += len(found)
        return "".join(pieces)

    def value(self, value: object) -> object:
        """``value`` (JSON data) with every string scrubbed, except identifiers and roles
        (``role``, ``type``, ``id``, ``tool_call_id``, ``finish_reason``); a list of
        content parts is scrubbed with its text parts joined as well (``parts``)."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, Mapping):
            return {
                key: item if key in _SKIPPED_KEYS else self.value(item)
                for key, item in value.items()
            }
        if isinstance(value, list | tuple):
            items = [self.value(item) for item in value]
            return self.parts(items) if sum(map(_is_text_part, items)) > 1 else items
        return value

    def parts(self, parts: list[object]) -> list[object]:
        """Content ``parts`` (each already scrubbed) with a secret split across text parts
        found too: the text parts' joined text is scrubbed again, and when that finds
        more, they become one text part at the first one's place."""
        texts = [part["text"] for part in parts if _is_text_part(part)]
        joined = "".join(texts)
        scrubbed = self.text(joined)
        if scrubbed == joined:
            return parts
        merged: list[object] = []
        placed = False
        for part in parts:
            if not _is_text_part(part):
                merged.append(part)
            elif not placed:
                merged.append({**part, "text": scrubbed})
                placed = True
        return merged

    def pseudonym(self, identifier: str) -> str:
        """``identifier`` itself, or, when it holds something scrubbed (an e-mail used as a
        conversation id), its scrubbed text numbered by first appearance (``[EMAIL]#1``):
        distinct identifiers stay distinct, and the same one always gets the same name."""
        scrubbed = self.text(identifier)
        if scrubbed == identifier:
            return identifier
        known = self._pseudonyms.get(identifier)
        if known is None:
            known = self._pseudonyms[identifier] = f"{scrubbed}#{len(self._pseudonyms) + 1}"
        return known
