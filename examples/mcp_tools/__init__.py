"""Library: tools served by an MCP server (stdio), looked up by the model."""
