"""Quick start: a one-turn question-answering environment scored by exact answer."""
