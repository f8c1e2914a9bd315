"""``Toolset``: tools that share per-rollout state."""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, ClassVar

from benchmax.tools._function import FunctionTool

__all__ = ["Toolset"]


class Toolset:
    """Tools (methods decorated with ``@tool``) sharing state that lives for one rollout.

    Put an instance in ``BaseEnv.tools``. The instance itself holds configuration and
    is pickled with the environment. For each rollout ``BaseEnv`` makes a shallow copy
    of it, sets ``rollout_id`` on the copy, enters the copy's ``rollout_context`` (after
    the environment's own ``rollout_context``, so what that made is ready) and runs the
    model's calls as methods of that copy; the context exits when the rollout ends,
    whatever the outcome. So attributes set in ``rollout_context`` (a scratch directory,
    a database handle seeded from the example) belong to one rollout, while attributes
    set in ``__init__`` are shared by every rollout::

        class Notes(Toolset):
            @asynccontextmanager
            async def rollout_context(self, rollout_id, example):
                self.notes = dict(example.payload.get("notes", {}))
                yield

            @tool
            def read_note(self, title: str) -> str:
                \"\"\"Read one note.\"\"\"
                if title not in self.notes:
                    raise ToolError(f"no note titled {title!r}")
                return self.notes[title]

    An exception raised while entering ``rollout_context`` ends the rollout as
    ``tool_error``; one raised on exit is logged.
    """

    tool_attributes: ClassVar[tuple[str, ...]] = ()
    """Names of the class's ``@tool`` methods, in definition order (set per subclass)."""

    rollout_id: str | None = None
    """The rollout a per-rollout copy serves; ``None`` on the configured instance."""

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        names: dict[str, None] = {}
        for klass in reversed(cls.__mro__):
            for name, value in vars(klass).items():
                if isinstance(value, FunctionTool):
                    names[name] = None
                else:
                    names.pop(name, None)  # overridden by a plain attribute
        cls.tool_attributes = tuple(names)

    @classmethod
    def function_tools(cls) -> tuple[FunctionTool[..., Any], ...]:
        """The class's tools (unbound ``FunctionTool``s)."""
        return tuple(getattr(cls, name) for name in cls.tool_attributes)

    def for_rollout(self, rollout_id: str) -> Toolset:
        """The per-rollout copy (shallow) with ``rollout_id`` set."""
        twin = copy.copy(self)
        twin.rollout_id = rollout_id
        return twin

    @asynccontextmanager
    async def rollout_context(self, rollout_id: str, example: Any) -> AsyncIterator[None]:
        """Create this rollout's state on ``self`` (the per-rollout copy); nothing by
        default. ``example`` is the rollout's ``Example`` (``example.payload`` is the row)."""
        yield
