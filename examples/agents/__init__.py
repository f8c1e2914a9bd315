"""Agents you didn't write: unmodified programs run and trained through the capture endpoint."""
