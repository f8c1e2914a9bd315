"""An environment whose module imports a third-party package it does not declare."""

from __future__ import annotations

import hypothesis
from tests.validation.envs import GoodEnv

HYPOTHESIS_VERSION = hypothesis.__version__


class UndeclaredImportEnv(GoodEnv):
    pass
