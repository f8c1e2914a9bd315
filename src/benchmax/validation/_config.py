"""``ValidationConfig``: where the data is, which model answers, what the bundle declares."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import cast

from benchmax._hook_deadlines import HookDeadlines
from benchmax._mock_url import MOCK_URL_MARKER
from benchmax._url_credentials import repr_masking_urls
from benchmax._value_checks import is_finite_number, is_int_at_least, is_non_empty_str
from benchmax.auth import ModelAuth
from benchmax.bundle import BundleMetadata
from benchmax.runner import NoModelAuth
from benchmax.testing import Policy

__all__ = ["MOCK_URL_MARKER", "ValidationConfig"]

"""In ``constructor_args``, stands for the embedded mock model's URL (as in ``benchmax run``)."""

_DEFAULT_SIZE_WARNING = 10 * 1024 * 1024


@dataclass(frozen=True, slots=True, kw_only=True)
class ValidationConfig:
    """How to validate one environment class.

    ``base_dir`` is the data directory passed to ``create_dataset``. With ``base_url`` unset
    the rollouts run against an embedded ``MockModelServer`` answering with ``policy``
    (``echo`` by default); the bundle's fresh-interpreter rollout always does.
    ``constructor_args`` may use ``"@mock"`` for the mock's URL. ``auth_providers`` bind the
    names ``InjectedAuth`` uses (the fresh interpreter binds the same names to a
    placeholder key). ``examples`` groups of ``group_size`` rollouts run; the bundle
    declares ``pip_dependencies`` and captures ``local_modules``. A bundle pickle larger
    than ``bundle_size_warning`` bytes is a warning. ``rollout_timeout`` and
    ``subprocess_timeout`` bound the rollouts and the fresh interpreter (seconds);
    ``fresh_interpreter=False`` skips that bundled rollout (a check reported as skipped).
    ``hook_deadlines`` bound the hooks the environment leaves unbounded, as in a run; by
    default each gets ``rollout_timeout / (2 * examples + 1)`` seconds (the bundled rollout:
    a third of ``subprocess_timeout``), so a hook that never returns is named before the
    rollouts' own deadline passes.
    """

    base_dir: Path = Path(".")
    constructor_args: Mapping[str, object] = field(default_factory=dict)
    model: str = "mock-model"
    base_url: str | None = None
    model_auth: ModelAuth = field(default_factory=NoModelAuth, repr=False)
    auth_providers: Mapping[str, ModelAuth] = field(default_factory=dict, repr=False)
    policy: Policy | None = None
    examples: int = 2
    group_size: int = 2
    pip_dependencies: Sequence[str] = ()
    local_modules: Sequence[ModuleType] = ()
    bundle_size_warning: int = _DEFAULT_SIZE_WARNING
    rollout_timeout: float = 300.0
    subprocess_timeout: float = 120.0
    fresh_interpreter: bool = True
    hook_deadlines: HookDeadlines | None = None

    def __repr__(self) -> str:
        return repr_masking_urls(self, "base_url")  # a password in the URL: user:***@

    def __post_init__(self) -> None:
        object.__setattr__(self, "base_dir", Path(self.base_dir))
        if not isinstance(self.constructor_args, Mapping):
            raise TypeError("constructor_args must be a mapping of parameter names to values")
        if not is_non_empty_str(self.model):
            raise ValueError("model must be a non-empty string")
        if self.base_url is not None and not is_non_empty_str(self.base_url):
            raise ValueError("base_url must be a non-empty string or None")
        if not isinstance(self.model_auth, ModelAuth):
            raise TypeError("model_auth must implement ModelAuth")
        if not isinstance(self.auth_providers, Mapping):
            raise TypeError("auth_providers must be a mapping of names to ModelAuth")
        if self.policy is not None and not callable(self.policy):
            raise TypeError("policy must be a mock model policy (a callable)")
        if not is_int_at_least(self.examples, 1):
            raise ValueError("examples must be a positive integer")
        if not is_int_at_least(self.group_size, 1):
            raise ValueError("group_size must be a positive integer")
        # The bundler's own normalization: the same errors as dump_bundle would raise.
        deps = BundleMetadata(
            # BundleMetadata checks and normalizes any value into the sorted tuple.
            pip_dependencies=cast(tuple[str, ...], self.pip_dependencies),
            python_version="3",
            benchmax_version="0",
            env_class_source=None,
        ).pip_dependencies
        object.__setattr__(self, "pip_dependencies", deps)
        modules = tuple(self.local_modules)
        if any(not isinstance(module, ModuleType) for module in modules):
            raise TypeError("local_modules must contain module objects")
        object.__setattr__(self, "local_modules", modules)
        if not is_int_at_least(self.bundle_size_warning, 1):
            raise ValueError("bundle_size_warning must be a positive number of bytes")
        if not isinstance(self.fresh_interpreter, bool):
            raise TypeError("fresh_interpreter must be a bool")
        for name in ("rollout_timeout", "subprocess_timeout"):
            value = getattr(self, name)
            if not (is_finite_number(value) and value > 0):
                raise ValueError(f"{name} must be a positive number of seconds")
        if self.hook_deadlines is not None and not isinstance(self.hook_deadlines, HookDeadlines):
            raise TypeError("hook_deadlines must be a HookDeadlines or None")

    def rollout_hook_deadlines(self) -> HookDeadlines:
        """The hook deadlines of the rollout checks."""
        if self.hook_deadlines is not None:
            return self.hook_deadlines
        return HookDeadlines.uniform(self.rollout_timeout / (2 * self.examples + 1))

    def bundle_hook_deadlines(self) -> HookDeadlines:
        """The hook deadlines of the bundled rollout in a fresh interpreter."""
        if self.hook_deadlines is not None:
            return self.hook_deadlines
        return HookDeadlines.uniform(self.subprocess_timeout / 3)

    @property
    def uses_mock(self) -> bool:
        """Whether the embedded mock model answers the rollouts."""
        return self.base_url is None
