"""Arithmetic: short-answer addition a small model learns in minutes (benchmax train)."""
