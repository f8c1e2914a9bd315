"""Exact match: a one-turn arithmetic task whose whole reply must equal the answer."""
