"""The library's MCP server: a small book catalog (``catalog.json``) behind two read-only
tools, written with the MCP SDK's server API. It speaks MCP over stdio::

    python examples/mcp_tools/server.py
"""

from __future__ import annotations

import json
from pathlib import Path

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import BaseModel

CATALOG = json.loads(Path(__file__).with_name("catalog.json").read_text())
READ_ONLY = ToolAnnotations(read_only_hint=True)

server = MCPServer("library", log_level="WARNING")


class Match(BaseModel):
    id: str
    title: str


class Matches(BaseModel):
    matches: list[Match]


class Book(BaseModel):
    id: str
    title: str
    author: str
    year: int


@server.tool(annotations=READ_ONLY)
def search(query: str) -> Matches:
    """Find books whose title contains every word of the query (case-insensitive)."""
    words = query.lower().split()
    found = [
        Match(id=book["id"], title=book["title"])
        for book in CATALOG
        if words and all(word in book["title"].lower().split() for word in words)
    ]
    return Matches(matches=found)


@server.tool(annotations=READ_ONLY)
def details(book_id: str) -> Book:
    """Title, author and first-publication year of the book with this id (from search)."""
    for book in CATALOG:
        if book["id"] == book_id:
            return Book(**book)
    raise ToolError(f"no book with id {book_id!r}; ids look like 'b01' (use search)")


if __name__ == "__main__":
    server.run()
