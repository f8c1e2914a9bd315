"""Custom Harbor agents whose source travels inside a serialized environment.

A ``BundledAgentSource`` captures an agent's files as bytes when the
environment is defined; ``BundledHarborAgent`` pairs it with the agent's Harbor
``AgentConfig``. In any process, ``_harbor_config()`` materializes the files once
into a private read-only tree and imports the agent through a synthetic package,
so nothing depends on the author's checkout or on ``sys.path``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Self

from benchmax.envs.harbor._agent_tree import import_bundled_module, namespace_for

if TYPE_CHECKING:
    from harbor.models.trial.config import AgentConfig

__all__ = ["BundledAgentSource", "BundledHarborAgent"]

_DOMAIN = b"benchmax-bundled-harbor-agent-v1\0"


def _checked_path(path: str | Path) -> str:
    raw = str(path)
    if not raw or "\\" in raw or "\0" in raw:
        raise ValueError(f"invalid bundled agent source path: {raw!r}")
    parsed = PurePosixPath(raw)
    parts = parsed.parts
    if parsed.is_absolute() or not parts or any(part in ("", ".", "..") for part in parts):
        raise ValueError(f"unsafe bundled agent source path: {raw!r}")
    if parsed.as_posix() != raw:
        raise ValueError(f"bundled agent source paths must be canonical POSIX paths: {raw!r}")
    return raw


def _content_id(files: tuple[tuple[str, bytes], ...]) -> str:
    digest = hashlib.sha256(_DOMAIN)
    for path, content in files:
        encoded = path.encode("utf-8")
        digest.update(len(encoded).to_bytes(8, "big"))
        digest.update(encoded)
        digest.update(len(content).to_bytes(8, "big"))
        digest.update(content)
    return "sha256:" + digest.hexdigest()


@dataclass(frozen=True, slots=True, repr=False)
class BundledAgentSource:
    """An agent's source and resource files, as sorted ``(relative path, bytes)`` pairs."""

    files: tuple[tuple[str, bytes], ...]
    content_id: str = field(init=False)

    def __post_init__(self) -> None:
        captured: dict[str, bytes] = {}
        for path, content in self.files:
            relative = _checked_path(path)
            if relative in captured:
                raise ValueError(f"duplicate bundled agent source path: {relative!r}")
            if not isinstance(content, bytes):
                raise TypeError(f"bundled agent source content for {relative!r} must be bytes")
            captured[relative] = content
        if not captured:
            raise ValueError("bundled agent source must contain at least one file")
        files = tuple(sorted(captured.items()))
        object.__setattr__(self, "files", files)
        object.__setattr__(self, "content_id", _content_id(files))

    def __repr__(self) -> str:
        return f"BundledAgentSource(content_id={self.content_id!r}, files={len(self.files)})"

    @classmethod
    def from_files(cls, files: Mapping[str, bytes]) -> Self:
        """Capture an in-memory mapping of relative path to file bytes."""
        return cls(tuple(files.items()))

    @classmethod
    def from_directory(cls, root: Path, *, files: Sequence[str | Path]) -> Self:
        """Read exactly the listed files under ``root``; symlinks are refused."""
        base = Path(root).expanduser().resolve(strict=True)
        if not base.is_dir():
            raise ValueError(f"bundled agent source root is not a directory: {base}")
        captured: list[tuple[str, bytes]] = []
        for entry in files:
            relative = _checked_path(entry)
            current = base
            for part in PurePosixPath(relative).parts:
                current = current / part
                if current.is_symlink():
                    raise ValueError(
                        f"bundled agent source paths cannot traverse symlinks: {relative!r}"
                    )
            if not current.is_file():
                raise ValueError(f"bundled agent source file is missing: {relative!r}")
            captured.append((relative, current.read_bytes()))
        return cls(tuple(captured))


def _split_import_path(import_path: str) -> tuple[str, str]:
    if import_path.count(":") != 1:
        raise ValueError("agent import_path must have the form 'module.path:ClassName'")
    module_name, class_name = import_path.split(":")
    if not module_name or not all(part.isidentifier() for part in module_name.split(".")):
        raise ValueError("agent import_path contains an invalid module name")
    if not class_name.isidentifier():
        raise ValueError("agent import_path contains an invalid class name")
    return module_name, class_name


@dataclass(frozen=True, slots=True, repr=False)
class BundledHarborAgent:
    """A custom Harbor agent config plus the captured source its import path names."""

    config: AgentConfig
    source: BundledAgentSource

    def __post_init__(self) -> None:
        from harbor.models.trial.config import AgentConfig

        config = self.config
        if not isinstance(config, AgentConfig):
            raise TypeError(
                "bundled Harbor agent config must be Harbor AgentConfig, "
                f"got {type(config).__name__}"
            )
        if config.name is not None or config.import_path is None:
            raise ValueError("bundled Harbor agents require an explicit import_path and no name")
        module_name, _ = _split_import_path(config.import_path)
        module_file = module_name.replace(".", "/")
        paths = {path for path, _ in self.source.files}
        if f"{module_file}.py" not in paths and f"{module_file}/__init__.py" not in paths:
            raise ValueError(
                f"bundled agent entry module {module_name!r} is absent from its source"
            )
        object.__setattr__(self, "config", config.model_copy(deep=True))

    def __repr__(self) -> str:
        return (
            f"BundledHarborAgent(import_path={self.config.import_path!r}, "
            f"source={self.source.content_id!r})"
        )

    def _harbor_config(self) -> AgentConfig:
        """Materialize and import the agent here; return a config naming the bundled class."""
        from harbor.agents.base import BaseAgent

        assert self.config.import_path is not None
        import_path = self.config.import_path
        module_name, class_name = _split_import_path(import_path)
        module = import_bundled_module(self.source.content_id, self.source.files, module_name)
        try:
            agent_class = getattr(module, class_name)
        except AttributeError:
            raise ValueError(
                f"bundled agent module {module_name!r} has no class {class_name!r}"
            ) from None
        if not isinstance(agent_class, type) or not issubclass(agent_class, BaseAgent):
            raise TypeError(
                f"bundled agent {import_path!r} must resolve to a Harbor BaseAgent subclass"
            )
        namespace = namespace_for(self.source.content_id)
        return self.config.model_copy(
            deep=True,
            update={"name": None, "import_path": f"{namespace}.{module_name}:{class_name}"},
        )
