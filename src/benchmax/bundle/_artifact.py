"""The artifact: ``Bundle``, its ``BundleMetadata``, canonical metadata bytes and the digest."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

from benchmax._value_checks import is_non_empty_str
from benchmax.bundle._dependencies import normalize_dependencies

__all__ = ["Bundle", "BundleMetadata", "bundle_digest"]

_METADATA_KEYS = frozenset(
    {"benchmax_version", "env_class_source", "pip_dependencies", "python_version"}
)
_REQUIRED_KEYS = ("pip_dependencies", "python_version", "benchmax_version")
_DIGEST_PREFIX = b"benchmax.bundle.v1\x00"


@dataclass(frozen=True)
class BundleMetadata:
    """What a runtime can read and check without unpickling anything.

    ``pip_dependencies`` is stored as the canonical, sorted tuple of PEP 508 strings.
    """

    pip_dependencies: tuple[str, ...]
    python_version: str
    benchmax_version: str
    env_class_source: str | None

    def __post_init__(self) -> None:
        object.__setattr__(self, "pip_dependencies", normalize_dependencies(self.pip_dependencies))
        for field_name in ("python_version", "benchmax_version"):
            value = getattr(self, field_name)
            if not is_non_empty_str(value):
                raise ValueError(f"{field_name} must be a non-empty string")
        if self.env_class_source is not None and not isinstance(self.env_class_source, str):
            raise TypeError("env_class_source must be a string or None")

    def to_json_bytes(self) -> bytes:
        """Canonical UTF-8 JSON: sorted keys, no whitespace, non-ASCII kept literal."""
        document = {
            "benchmax_version": self.benchmax_version,
            "env_class_source": self.env_class_source,
            "pip_dependencies": list(self.pip_dependencies),
            "python_version": self.python_version,
        }
        text = json.dumps(document, ensure_ascii=False, separators=(",", ":"), sort_keys=True)
        return text.encode("utf-8")

    @classmethod
    def from_json_bytes(cls, data: bytes) -> BundleMetadata:
        """Parse metadata written by ``to_json_bytes``; unknown (legacy) keys are refused."""
        try:
            document: object = json.loads(data.decode("utf-8"))
        except (AttributeError, UnicodeDecodeError, ValueError, RecursionError) as exc:
            raise ValueError("bundle metadata must be a UTF-8 JSON object") from exc
        if not isinstance(document, dict):
            raise ValueError("bundle metadata must be a JSON object")
        unknown = sorted(set(document) - _METADATA_KEYS)
        if unknown:
            raise ValueError(
                f"bundle metadata has unsupported keys {unknown}; "
                "re-bundle with a current BenchMax release"
            )
        for key in _REQUIRED_KEYS:
            if key not in document:
                raise ValueError(f"bundle metadata is missing {key!r}")
        return cls(
            pip_dependencies=document["pip_dependencies"],
            python_version=document["python_version"],
            benchmax_version=document["benchmax_version"],
            env_class_source=document.get("env_class_source"),
        )


@dataclass(frozen=True)
class Bundle:
    """A deployable environment: the cloudpickle payload and its metadata."""

    pickled: bytes
    metadata: BundleMetadata

    def __post_init__(self) -> None:
        if not isinstance(self.pickled, bytes):
            raise TypeError("bundle pickled payload must be bytes")
        if not isinstance(self.metadata, BundleMetadata):
            raise TypeError("bundle metadata must be BundleMetadata")

    def __repr__(self) -> str:
        # The pickle embeds the constructor arguments, which may hold credentials: show its size.
        return f"Bundle(pickled=<{len(self.pickled)} bytes>, metadata={self.metadata!r})"


def bundle_digest(bundle: Bundle) -> str:
    """SHA-256 identity of the whole artifact: exact pickle bytes plus canonical metadata."""
    if not isinstance(bundle, Bundle):
        raise TypeError("bundle_digest requires a Bundle")
    digest = hashlib.sha256(_DIGEST_PREFIX)
    for component in (bundle.pickled, bundle.metadata.to_json_bytes()):
        digest.update(len(component).to_bytes(8, "big"))
        digest.update(component)
    return digest.hexdigest()
