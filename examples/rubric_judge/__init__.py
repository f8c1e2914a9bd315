"""Rubric judge: answers scored by an LLM judge against three rubrics."""
