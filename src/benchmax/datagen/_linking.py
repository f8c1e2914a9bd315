"""Related chunks for multi-hop questions, found lexically with BM25 (the ``bm25s`` library)."""

from __future__ import annotations

from collections.abc import Sequence

from benchmax.datagen._chunking import Chunk

__all__ = ["related_chunks"]

_CANDIDATES = 10


def related_chunks(chunks: Sequence[Chunk]) -> list[int | None]:
    """For each chunk, the index in ``chunks`` of its most related other chunk, or ``None``.

    Every chunk is a BM25 query (English stop words removed) against all the others; a
    chunk of another document with a positive score is preferred to one of the same
    document (which shares overlap sentences and headings), and the highest score wins.
    A chunk sharing no term with any other has no partner.
    """
    if len(chunks) < 2:
        return [None] * len(chunks)
    import bm25s  # numpy behind it: loaded only when multi-hop questions are wanted

    texts = [chunk.text for chunk in chunks]
    tokens = bm25s.tokenize(texts, stopwords="en", show_progress=False)
    index = bm25s.BM25()
    index.index(tokens, show_progress=False)
    k = min(len(chunks), _CANDIDATES + 1)
    found, scores = index.retrieve(tokens, k=k, show_progress=False, n_threads=1)
    partners: list[int | None] = []
    for position, chunk in enumerate(chunks):
        best: tuple[bool, float, int] | None = None
        for candidate, score in zip(found[position], scores[position], strict=True):
            other = int(candidate)
            if other == position or float(score) <= 0:
                continue
            key = (chunks[other].document.name != chunk.document.name, float(score), -other)
            if best is None or key > best:
                best = key
        partners.append(None if best is None else -best[2])
    return partners
