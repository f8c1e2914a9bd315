"""A rollout's model calls as branches of training samples, and how many sampled tokens they cover.

The model calls of a rollout that recorded token ids form a graph. A call whose prompt ids
start with an earlier call's prompt + completion ids *continues* that call, provided no
other call continued it already (the earlier call is the tip of its chain); the calls
chained this way make one :class:`Branch`, and one branch is one training sample: its
first call's prompt, then every token after it, sampled ones (mask 1) and the ones the
environment added between calls (tool results, later turns, template tokens; mask 0).
The tip searched first is the previous call's (the usual single conversation), then the
other tips, latest first (parallel subagents interleave their calls).

Any other call begins a new branch, for one of these reasons (:data:`BranchStart`):

- ``"first"``: the rollout's first call with token ids;
- ``"retry"``: its prompt ids equal an earlier call's (the same request sent again, or
  several samples of one prompt);
- ``"fork"``: its prompt extends an earlier call that another call had continued already
  (two subagents going on from the same point);
- ``"history_rewritten"``: its prompt extends no earlier call (a chat template that
  re-rendered earlier turns, e.g. dropped reasoning or re-serialised tool-call JSON; an
  agent that edited its history; a conversation of its own).

So every sampled token is in exactly one branch. :class:`TokenCoverage` counts the tokens
the rollout sampled and the ones its training samples hold (per branch too); it is the
``coverage`` field of a results-file rollout line (``docs/results-format.md``).

Stitching reads each call's ids a bounded number of times: a call that continues the
previous call costs O(1) once ``ModelCall.continues`` has settled that (as ``BaseEnv`` and
a results line do), one that continues another tip costs the length of that tip's
context, and one that begins a branch the length of its prompt (which its sample copies
anyway). This module imports only a leaf module, so ``benchmax.trajectory`` builds
on it (the results line's types live in the leaf ``benchmax._trajectory_records``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final, Protocol, Self, get_args

from benchmax._trajectory_records import BranchCoverageRecord, BranchStart, CoverageRecord

__all__ = [
    "BRANCH_STARTS",
    "Branch",
    "BranchCoverage",
    "BranchCoverageRecord",
    "BranchStart",
    "CoverageRecord",
    "TokenCall",
    "TokenCoverage",
    "stitch_branches",
]

BRANCH_STARTS: Final[tuple[BranchStart, ...]] = get_args(BranchStart)


class TokenCall(Protocol):
    """What stitching reads of a model call (``benchmax.trajectory.ModelCall`` is one)."""

    @property
    def prompt_token_ids(self) -> tuple[int, ...] | None: ...
    @property
    def completion_token_ids(self) -> tuple[int, ...] | None: ...
    def continues(self, previous: Self) -> bool:
        """Whether this call's prompt ids start with ``previous``'s prompt + completion."""
        ...


@dataclass(frozen=True, slots=True)
class Branch:
    """One chain of model calls, one training sample.

    ``calls``: indices into the rollout's model calls, in order, each call continuing the
    one before; ``began``: why the first of them began a branch; ``sampled_tokens``: the
    completion tokens of those calls (the sample's mask-1 tokens).
    """

    began: BranchStart
    calls: tuple[int, ...]
    sampled_tokens: int

    def __post_init__(self) -> None:
        if self.began not in BRANCH_STARTS:
            raise ValueError(f"Branch.began must be one of {BRANCH_STARTS}, got {self.began!r}")
        if not self.calls:
            raise ValueError("Branch.calls must name at least one model call")
        if self.sampled_tokens < 0:
            raise ValueError("Branch.sampled_tokens must be >= 0")


@dataclass(frozen=True, slots=True)
class BranchCoverage:
    """A branch as coverage reports it: why it began, how many calls and sampled tokens."""

    began: BranchStart
    calls: int
    sampled_tokens: int

    def __post_init__(self) -> None:
        if self.began not in BRANCH_STARTS:
            raise ValueError(f"branch began must be one of {BRANCH_STARTS}, got {self.began!r}")
        if not _is_count(self.calls) or not _is_count(self.sampled_tokens):
            raise ValueError("branch calls and sampled_tokens must be non-negative integers")

    def to_json(self) -> BranchCoverageRecord:
        return {"began": self.began, "calls": self.calls, "sampled_tokens": self.sampled_tokens}


@dataclass(frozen=True, slots=True)
class TokenCoverage:
    """How many of a rollout's sampled tokens its training samples hold.

    ``sampled_tokens``: completion tokens the rollout's model calls recorded;
    ``trained_tokens``: those the samples hold with mask 1 (by stitching alone, every
    sampled token of a call with prompt ids too; a trainer reports what it really
    trained); ``branches``: the branches, in the order they began. ``ValueError`` for
    counts that are not non-negative integers or ``trained_tokens > sampled_tokens``.
    """

    sampled_tokens: int
    trained_tokens: int
    branches: tuple[BranchCoverage, ...] = ()

    def __post_init__(self) -> None:
        if not _is_count(self.sampled_tokens) or not _is_count(self.trained_tokens):
            raise ValueError("coverage token counts must be non-negative integers")
        if self.trained_tokens > self.sampled_tokens:
            raise ValueError(
                f"coverage trained_tokens ({self.trained_tokens}) exceeds sampled_tokens "
                f"({self.sampled_tokens})"
            )

    @property
    def share(self) -> float:
        """``trained_tokens / sampled_tokens`` (1.0 when nothing was sampled)."""
        return self.trained_tokens / self.sampled_tokens if self.sampled_tokens else 1.0

    @property
    def lost_tokens(self) -> int:
        """Sampled tokens no sample holds."""
        return self.sampled_tokens - self.trained_tokens

    @classmethod
    def of(
        cls,
        calls: Sequence[TokenCall],
        branches: Sequence[Branch],
        *,
        trained_tokens: int | None = None,
    ) -> TokenCoverage:
        """The coverage of ``calls`` stitched into ``branches`` (:func:`stitch_branches`):
        ``trained_tokens`` defaults to the branches' sampled tokens (what their samples
        hold); a trainer passes the mask-1 tokens it was really handed."""
        sampled = sum(len(c.completion_token_ids or ()) for c in calls)
        listed = tuple(BranchCoverage(b.began, len(b.calls), b.sampled_tokens) for b in branches)
        if trained_tokens is None:
            trained_tokens = sum(b.sampled_tokens for b in branches)
        return cls(sampled, trained_tokens, listed)

    def to_json(self) -> CoverageRecord:
        return {
            "sampled_tokens": self.sampled_tokens,
            "trained_tokens": self.trained_tokens,
            "branches": [branch.to_json() for branch in self.branches],
        }

    @classmethod
    def from_json(cls, data: object) -> TokenCoverage | None:
        """The coverage a results line holds; ``None`` when absent (older files) or not
        the documented shape (read leniently, as a line's other optional parts are)."""
        if not isinstance(data, Mapping):
            return None
        branches = data.get("branches")
        try:
            listed = tuple(
                BranchCoverage(b["began"], b["calls"], b["sampled_tokens"])
                for b in (branches if isinstance(branches, list) else ())
            )
            return cls(data.get("sampled_tokens"), data.get("trained_tokens"), listed)  # type: ignore[arg-type]
        except (KeyError, TypeError, ValueError):
            return None


def stitch_branches[C: TokenCall](calls: Sequence[C]) -> tuple[Branch, ...]:
    """``calls`` (a rollout's model calls, in order) as branches, in the order they began
    (see the module docs). Calls without prompt or completion ids belong to no branch;
    ``()`` when none has both."""
    chains: list[list[int]] = []
    began: list[BranchStart] = []
    tips: list[int] = []  # per branch: its last call's index
    is_tip: dict[int, bool] = {}  # per call with ids: whether no call continued it yet
    by_prompt: dict[tuple[int, int], list[int]] = {}  # (length, last id) -> call indices
    latest: int | None = None  # the branch of the previous call with ids
    for index, call in enumerate(calls):
        prompt, completion = call.prompt_token_ids, call.completion_token_ids
        if prompt is None or completion is None:
            continue
        branch = _continued_branch(calls, call, chains, tips, latest)
        if branch is not None:
            is_tip[tips[branch]] = False
            chains[branch].append(index)
            tips[branch] = index
        else:
            began.append(_why_new(calls, prompt, is_tip, by_prompt) if chains else "first")
            branch = len(chains)
            chains.append([index])
            tips.append(index)
        is_tip[index] = True
        by_prompt.setdefault(_prompt_key(prompt), []).append(index)
        latest = branch
    return tuple(
        Branch(reason, tuple(chain), sum(len(calls[i].completion_token_ids or ()) for i in chain))
        for reason, chain in zip(began, chains, strict=True)
    )


def _continued_branch[C: TokenCall](
    calls: Sequence[C], call: C, chains: list[list[int]], tips: list[int], latest: int | None
) -> int | None:
    """The branch whose tip ``call`` continues: the previous call's first, then the other
    tips, the latest begun first; ``None`` when it continues none."""
    if latest is None:
        return None
    prompt = call.prompt_token_ids
    assert prompt is not None
    # The O(1) filter first, also for the previous call: ``continues`` keeps one answer per
    # call, so asking it about a tip that cannot match would evict the answer it keeps.
    previous = calls[tips[latest]]
    if _may_extend(prompt, previous) and call.continues(previous):
        return latest
    for branch in range(len(chains) - 1, -1, -1):
        if branch == latest:
            continue
        tip = calls[tips[branch]]
        if _may_extend(prompt, tip) and call.continues(tip):
            return branch
    return None


def _why_new[C: TokenCall](
    calls: Sequence[C],
    prompt: tuple[int, ...],
    is_tip: dict[int, bool],
    by_prompt: dict[tuple[int, int], list[int]],
) -> BranchStart:
    """Why a call that continues no tip begins a branch (not the first one)."""
    for earlier in by_prompt.get(_prompt_key(prompt), ()):
        if calls[earlier].prompt_token_ids == prompt:
            return "retry"
    for earlier, tip in is_tip.items():
        if not tip and _may_extend(prompt, calls[earlier]) and _extends(prompt, calls[earlier]):
            return "fork"
    return "history_rewritten"


def _prompt_key(prompt: tuple[int, ...]) -> tuple[int, int]:
    return (len(prompt), prompt[-1] if prompt else -1)


def _may_extend(prompt: tuple[int, ...], earlier: TokenCall) -> bool:
    """A cheap necessary condition for ``prompt`` to start with ``earlier``'s prompt +
    completion: it is long enough and has the same ids where that context begins and
    ends and on both sides of where the completion begins (a re-rendered or edited
    history, or another conversation, almost always differs at one of them)."""
    before, sampled = earlier.prompt_token_ids, earlier.completion_token_ids
    assert before is not None and sampled is not None
    split = len(before)
    end = split + len(sampled)
    if len(prompt) < end:
        return False
    if split and (prompt[0] != before[0] or prompt[split - 1] != before[-1]):
        return False
    return not sampled or (prompt[split] == sampled[0] and prompt[end - 1] == sampled[-1])


def _extends(prompt: tuple[int, ...], earlier: TokenCall) -> bool:
    """Whether ``prompt`` starts with ``earlier``'s prompt + completion (compared, not
    remembered: unlike ``continues``, this leaves the calls as they are)."""
    before, sampled = earlier.prompt_token_ids, earlier.completion_token_ids
    assert before is not None and sampled is not None
    split = len(before)
    return prompt[split : split + len(sampled)] == sampled and prompt[:split] == before


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0
