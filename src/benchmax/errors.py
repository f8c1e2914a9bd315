"""The root of benchmax's exceptions: every exception class benchmax defines derives from
``BenchmaxError``, so ``except BenchmaxError`` catches all of them. (Bad arguments still
raise the builtin ``ValueError``/``TypeError`` named in the contract, and an environment's
own exceptions stay its own.)

Each package that raises exceptions has one base under the root, defined in that package;
an exception that was a ``ValueError``, ``TypeError`` or ``RuntimeError`` in 0.2 still is::

    BenchmaxError                      benchmax.errors (also benchmax.BenchmaxError)
    ├── EnvError                       benchmax.envs: RolloutFailure (JudgeError from
    │                                  benchmax.rewards), RewardShapeError, NotAsyncHook, ...
    ├── BundleError                    benchmax.bundle: BundlingError, IncompatibleRuntimeError
    ├── ToolLayerError                 benchmax.tools: ToolError, MCPServerError, ...
    ├── RunError                       benchmax.runner: ResultsFileError, GroupContractError, ...
    ├── TrainingError                  benchmax.training: TrainError, ConfigError, ...
    ├── DatagenError                   benchmax.datagen: CorpusError, TracesError, ...
    ├── ServingError                   benchmax.serving: SplitError, ...
    ├── SourceError                    benchmax.sources (internal)
    ├── MockServerError                benchmax.testing: Fault, PolicyResultError
    ├── ScaffoldError                  benchmax.scaffold
    ├── CLIError                       benchmax.cli (internal)
    ├── ModelHTTPError                 benchmax._modelhttp (internal)
    └── StrayCancellation              benchmax._cancellation (internal)

This module imports nothing from benchmax, so every package can import it.
"""

from __future__ import annotations

__all__ = ["BenchmaxError"]


class BenchmaxError(Exception):
    """The root of every exception benchmax raises."""
