"""A small verifiers 0.4 environment package (taskset id ``verifiers-arith``).

Tasks ask for ``a + b`` (``num_tasks`` of them, numbers from ``Random(seed)``), answered
in ``\\boxed{}``. Rewards: ``correct`` (weight 1.0) and ``formatted`` (weight 0.25, a
``\\boxed{}`` answer is present); metric ``reply_chars``. With ``task.tools`` true the
task offers the ``calc_add`` tool (a ``Toolset`` whose prefix is ``calc``).
"""

from verifiers_arith.taskset import ArithTaskset

__all__ = ["ArithTaskset"]
