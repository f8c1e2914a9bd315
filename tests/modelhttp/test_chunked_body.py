"""The chunked-body reader shared by the capture endpoint's client and server sides."""

from __future__ import annotations

import pytest

from benchmax._modelhttp import ChunkedBody, ChunkedBodyError, ChunkedBodyTooLarge

WHOLE = b"4;ext=1\r\nWiki\r\n5\r\npedia\r\n0\r\nTrailer: x\r\n\r\n"


def test_a_body_fed_one_byte_at_a_time_ends_where_its_trailers_end() -> None:
    buffer = bytearray(b"HEAD")
    reader = ChunkedBody(at=4)
    ends = []
    for byte in WHOLE + b"NEXT":
        buffer.append(byte)
        ends.append(reader.read(buffer))
    assert next(end for end in ends if end is not None) == 4 + len(WHOLE)
    assert reader.body() == b"Wikipedia"


def test_no_trailers() -> None:
    reader = ChunkedBody()
    assert reader.read(bytearray(b"3\r\nabc\r\n0\r\n\r\n")) == 13
    assert reader.body() == b"abc"


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b"zz\r\nabc\r\n", "a chunk size of b'zz'"),
        (b"-3\r\nabc\r\n", "a chunk size of b'-3'"),
        (b"3\r\nabcX\r\n", "a chunk that does not end with CRLF"),
    ],
)
def test_broken_framing_is_named(raw: bytes, message: str) -> None:
    with pytest.raises(ChunkedBodyError, match=message.replace("(", r"\(")):
        ChunkedBody().read(bytearray(raw))


def test_a_chunk_past_the_limit_is_refused_before_it_arrives() -> None:
    reader = ChunkedBody(limit=8)
    assert reader.read(bytearray(b"5\r\nabcde\r\n")) is None
    with pytest.raises(ChunkedBodyTooLarge, match="over 8 bytes"):
        reader.read(bytearray(b"5\r\nabcde\r\n4\r\n"))
