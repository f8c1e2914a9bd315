"""Check an environment before a training run: ``validate_environment``.

``await validate_environment(MyEnv, ValidationConfig(base_dir=Path("data")))`` runs every
check (class, constructor, reward keys, datasets, prompt messages, tool schemas, a few
rollout groups against the embedded mock model or a real endpoint, reward variance, the
bundle round trip in a fresh interpreter, bundle size and dependency declarations) and
returns a ``ValidationReport`` of ``CheckResult`` values; ``report.ok`` is false when a
check failed. ``benchmax validate`` prints the same report.
"""

from benchmax.validation._config import MOCK_URL_MARKER, ValidationConfig
from benchmax.validation._report import CheckResult, CheckStatus, ValidationReport
from benchmax.validation._validate import validate_environment

__all__ = [
    "MOCK_URL_MARKER",
    "CheckResult",
    "CheckStatus",
    "ValidationConfig",
    "ValidationReport",
    "validate_environment",
]
