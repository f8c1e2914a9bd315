"""Calculator: a multi-turn task where the model computes with tools."""
