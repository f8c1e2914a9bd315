"""``read_corpus`` and ``chunk_document``: documents from files, chunks by structure and size."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from benchmax.datagen import ChunkingConfig, CorpusError, Document, chunk_document, read_corpus


def test_a_directory_gives_txt_md_and_jsonl_documents_sorted(tmp_path: Path) -> None:
    (tmp_path / "b.md").write_text("# B\n\nBee text.")
    (tmp_path / "a.txt").write_text("Aye text.")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "c.jsonl").write_text(
        json.dumps({"text": "First record."}) + "\n\n" + json.dumps({"text": "Second."}) + "\n"
    )
    (tmp_path / "notes.py").write_text("print('not a document')")
    (tmp_path / ".hidden.txt").write_text("hidden")
    (tmp_path / "empty.md").write_text("  \n")
    documents = read_corpus(tmp_path)
    assert [d.name for d in documents] == ["a.txt", "b.md", "sub/c.jsonl:1", "sub/c.jsonl:3"]
    assert documents[2] == Document(file="sub/c.jsonl", text="First record.", line=1)


def test_a_utf8_byte_order_mark_is_not_part_of_a_document(tmp_path: Path) -> None:
    bom = b"\xef\xbb\xbf"
    (tmp_path / "a.txt").write_bytes(bom + b"Aye text.")
    (tmp_path / "b.jsonl").write_bytes(bom + json.dumps({"text": "Bee."}).encode() + b"\n")
    assert read_corpus(tmp_path) == [Document("a.txt", "Aye text."), Document("b.jsonl", "Bee.", 1)]


def test_a_single_file_and_a_named_text_field(tmp_path: Path) -> None:
    path = tmp_path / "docs.jsonl"
    path.write_text(json.dumps({"body": "Body text.", "text": 3}) + "\n")
    assert read_corpus(path, text_field="body") == [Document("docs.jsonl", "Body text.", 1)]
    with pytest.raises(
        CorpusError, match=r"docs.jsonl:1: field 'text' is a number, not a string.*--text-field"
    ):
        read_corpus(path)
    with pytest.raises(
        CorpusError, match=r"docs.jsonl: no record has a field 'title'.*--text-field"
    ):
        read_corpus(path, text_field="title")


def test_the_output_directory_is_not_read_as_corpus(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("Aye.")
    (tmp_path / "qa").mkdir()
    (tmp_path / "qa" / "train.jsonl").write_text(json.dumps({"prompt": "q"}) + "\n")
    assert [d.name for d in read_corpus(tmp_path, exclude=[tmp_path / "qa"])] == ["a.txt"]


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("bad.jsonl", b'{"text": \n', r"bad.jsonl:1: not valid JSON"),
        ("list.jsonl", b"[1, 2]\n", r"list.jsonl:1: not a JSON object"),
        ("latin.txt", "caf\xe9".encode("latin-1"), r"latin.txt: not UTF-8 text"),
    ],
)
def test_unreadable_documents_name_file_and_line(
    tmp_path: Path, name: str, content: bytes, message: str
) -> None:
    (tmp_path / name).write_bytes(content)
    with pytest.raises(CorpusError, match=message):
        read_corpus(tmp_path)


def test_missing_and_empty_corpora_are_errors(tmp_path: Path) -> None:
    with pytest.raises(CorpusError, match="corpus not found"):
        read_corpus(tmp_path / "nope")
    with pytest.raises(CorpusError, match=r"no non-empty \.txt, \.md, \.jsonl documents"):
        read_corpus(tmp_path)
    (tmp_path / "x.csv").write_text("a,b")
    with pytest.raises(CorpusError, match=r"not a \.txt, \.md, \.jsonl file"):
        read_corpus(tmp_path / "x.csv")


def sentences(count: int, start: int = 0) -> str:
    return " ".join(f"Fact number {i} is stated here." for i in range(start, start + count))


def test_headings_start_chunks_and_stay_with_their_text() -> None:
    text = f"# Title\n\nIntro.\n\n## One\n\n{sentences(2)}\n\n## Two\n\n{sentences(2, 10)}"
    chunks = chunk_document(Document("d.md", text), ChunkingConfig(max_chars=1000))
    assert [c.text.split("\n")[0] for c in chunks] == ["# Title", "## One", "## Two"]
    assert chunks[1].text == f"## One\n\n{sentences(2)}"
    assert [c.index for c in chunks] == [0, 1, 2]


def test_paragraphs_pack_up_to_the_size_and_long_ones_split_at_sentences() -> None:
    text = "\n\n".join([sentences(3), sentences(3, 3), sentences(40, 6)])
    config = ChunkingConfig(max_chars=400, overlap_chars=0)
    chunks = chunk_document(Document("d.txt", text), config)
    assert len(chunks) > 3
    assert all(len(c.text) <= 400 for c in chunks)
    assert chunks[0].text.startswith(sentences(3) + "\n\n" + sentences(3, 3))
    assert all(c.text.endswith(".") for c in chunks)  # cut at sentence ends
    joined = " ".join(c.text.replace("\n\n", " ") for c in chunks)
    assert joined == " ".join(text.split())  # nothing lost, nothing repeated


def test_chunks_of_one_section_overlap_by_whole_sentences() -> None:
    text = sentences(30)
    chunks = chunk_document(
        Document("d.txt", text), ChunkingConfig(max_chars=300, overlap_chars=70)
    )
    assert len(chunks) >= 3
    for before, after in itertools.pairwise(chunks):
        repeated = after.text.split("\n\n")[0]
        assert before.text.endswith(repeated)
        assert 0 < len(repeated) <= 70


def test_a_new_section_carries_no_overlap() -> None:
    text = f"## A\n\n{sentences(12)}\n\n## B\n\nOther."
    chunks = chunk_document(Document("d.md", text), ChunkingConfig(max_chars=200, overlap_chars=60))
    assert chunks[-1].text == "## B\n\nOther."


def test_a_sentence_longer_than_a_chunk_is_cut_at_words() -> None:
    text = " ".join(["word"] * 200) + "."
    chunks = chunk_document(Document("d.txt", text), ChunkingConfig(max_chars=150, overlap_chars=0))
    assert all(len(c.text) <= 150 for c in chunks)
    assert " ".join(c.text for c in chunks) == text


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"max_chars": 99}, "max_chars"),
        ({"max_chars": 200, "overlap_chars": 200}, "overlap_chars"),
        ({"overlap_chars": -1}, "overlap_chars"),
        ({"max_chars": True}, "max_chars"),
    ],
)
def test_chunking_config_is_validated(options: dict[str, int], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ChunkingConfig(**options)
