"""A small verifiers 0.4 environment package for the tests (taskset id ``bm-vf-arith``).

Tasks ask for ``a + b`` (``num_tasks`` of them, numbers from ``Random(seed)``); the
answer goes in ``\\boxed{}``. Rewards: ``correct`` (weight 1.0), ``formatted`` (weight
0.25, a ``\\boxed{}`` answer is present); metric ``reply_chars``. With ``tools=True`` the
task offers the ``calc_add`` tool (a ``Toolset`` named ``calc``).
"""

from bm_vf_arith.taskset import ArithConfig, ArithTask, ArithTaskset, boxed_answer

__all__ = ["ArithTaskset"]

_ = (ArithConfig, ArithTask, boxed_answer)
