"""A verifiers 0.4 taskset (id ``bm-vf-refused``) whose ``variant`` config field picks a
task using a part of verifiers' API that benchmax refuses (see ``VARIANTS``)."""

from bm_vf_refused.taskset import VARIANTS, RefusedTaskset

__all__ = ["RefusedTaskset"]

_ = VARIANTS
