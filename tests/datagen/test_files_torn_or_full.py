"""Issue 28 kind 10: files torn or full. A generate-qa checkpoint whose last line is cut
inside a UTF-8 character is read (the torn line ignored, and cut off before new lines are
appended); JSONL corpus records with a null, numeric or missing text field are skipped and
counted (``file:line``); ``view -o`` onto a full disk (a file-size limit) leaves the old
page whole and no temporary file; the run report is written the same way."""

from __future__ import annotations

import json
import logging
import os
import resource
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from tests.cli.conftest import REPO
from tests.datagen.test_generate import generate, lines_as_pairs, passage_of, write

from benchmax.cli import cli
from benchmax.datagen import CACHE_NAME
from benchmax.datagen._corpus import CorpusError, read_corpus
from benchmax.testing import MockModelServer

CORPUS = {
    "kyoto.txt": "Quelle est la capitale historique du Japon ? => Kyōto",
    "cafe.txt": "Où boit-on un café crème ? => au café",
    "oslo.txt": "What is the capital of Norway? => Oslo",
}


async def test_a_checkpoint_cut_inside_a_utf8_character_is_read(tmp_path: Path) -> None:
    corpus = write(tmp_path / "corpus", CORPUS)
    async with MockModelServer(lines_as_pairs) as server:
        await generate(server, corpus, tmp_path / "qa")
    cache = tmp_path / "qa" / CACHE_NAME
    data = cache.read_bytes()
    lines = data.split(b"\n")[:-1]
    torn_line = next(i for i, line in enumerate(lines) if "ō".encode() in line)
    cut = lines[torn_line].index("ō".encode()) + 1  # inside the two bytes of "ō"
    kept = [line for i, line in enumerate(lines) if i != torn_line]
    cache.write_bytes(b"\n".join(kept) + b"\n" + lines[torn_line][:cut])
    with pytest.raises(UnicodeDecodeError):
        cache.read_text(encoding="utf-8")  # what every re-run used to stop at

    async with MockModelServer(lines_as_pairs) as server:
        summary = await generate(server, corpus, tmp_path / "qa")
        assert [passage_of(r.body) for r in server.requests] == [CORPUS["kyoto.txt"]]
    assert summary.tasks_cached == 2 and summary.pairs_kept == 3
    # The torn bytes were cut off before the redone chunk was appended: every line reads.
    repaired = cache.read_text(encoding="utf-8").splitlines()
    assert len(repaired) == 3 and all(json.loads(line)["key"] for line in repaired)
    async with MockModelServer(lines_as_pairs) as server:
        again = await generate(server, corpus, tmp_path / "qa")
        assert server.requests == []
    assert again.tasks_cached == 3


def test_jsonl_records_without_text_are_skipped_and_counted(tmp_path: Path) -> None:
    records = [
        {"text": "Oslo is the capital of Norway."},
        {"text": None},
        {"text": 42},
        {"title": "no text field"},
        {"text": "Lima is the capital of Peru."},
    ]
    body = "".join(json.dumps(r) + "\n" for r in records) + "[1, 2]\n" + '{"text": "torn'
    (tmp_path / "docs.jsonl").write_text(body)
    skipped: list[str] = []
    documents = read_corpus(tmp_path, skipped_records=skipped)
    assert [(d.name, d.text) for d in documents] == [
        ("docs.jsonl:1", "Oslo is the capital of Norway."),
        ("docs.jsonl:5", "Lima is the capital of Peru."),
    ]
    assert skipped == [
        "docs.jsonl:2: field 'text' is null, not a string",
        "docs.jsonl:3: field 'text' is a number, not a string",
        "docs.jsonl:4: field 'text' is missing",
        "docs.jsonl:6: not a JSON object",
        "docs.jsonl:7: not valid JSON (Unterminated string starting at)",
    ]
    (tmp_path / "docs.jsonl").write_text('{"text": null}\n{"text": 3}\n')
    with pytest.raises(CorpusError, match=r"2 JSONL records skipped: docs.jsonl:1: field 'text'"):
        read_corpus(tmp_path)


def test_generate_qa_names_the_skipped_records(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "notes.jsonl").write_text(
        json.dumps({"text": "Tokyo is the capital of Japan. Lima is the capital of Peru."})
        + "\n"
        + json.dumps({"text": None})
        + "\n"
    )
    result = CliRunner().invoke(
        cli,
        [
            "generate-qa",
            str(corpus),
            "-o",
            str(tmp_path / "qa"),
            "--mock-policy",
            "examples/corpus/policy.py:reply",
        ],
    )
    assert result.exit_code == 0, result.output  # the example mock writes on any text
    assert "skipped notes.jsonl:2: field 'text' is null, not a string" in result.output
    assert "JSONL records without text, skipped" in result.output


def _limited(size: int) -> None:
    """In the child: writes past ``size`` bytes fail (EFBIG) instead of killing it."""
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))


@pytest.mark.skipif(not hasattr(resource, "RLIMIT_FSIZE"), reason="POSIX file-size limit")
def test_view_onto_a_full_disk_leaves_the_old_page_whole(tmp_path: Path) -> None:
    results = tmp_path / "run.jsonl"
    run = CliRunner().invoke(
        cli,
        [
            "run",
            "examples/quickstart/env.py:QuickStartEnv",
            "--data",
            "examples/quickstart",
            "--mock-policy",
            "examples/quickstart/policy.py:reply",
            "-o",
            str(results),
        ],
    )
    assert run.exit_code == 0, run.output
    page = tmp_path / "run.html"
    page.write_text("the page of before\n")
    view = subprocess.run(
        [sys.executable, "-m", "benchmax.cli", "view", str(results), "-o", str(page)],
        cwd=REPO,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
        preexec_fn=lambda: _limited(16 * 1024),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert view.returncode == 3, view.stdout + view.stderr
    assert f"cannot write {page}" in view.stderr and "File too large" in view.stderr
    assert page.read_text() == "the page of before\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["run.jsonl", "run.report.json", "run.html"]
    )
    # Without the limit the page is written whole.
    whole = subprocess.run(
        [sys.executable, "-m", "benchmax.cli", "view", str(results), "-o", str(page)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert whole.returncode == 0, whole.stderr
    assert page.read_text().rstrip().endswith("</html>")


async def test_a_cache_line_nested_too_deeply_is_named_and_redone(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A line nested 100,000 deep used to stop every re-run with RecursionError."""
    corpus = write(tmp_path / "corpus", CORPUS)
    async with MockModelServer(lines_as_pairs) as server:
        await generate(server, corpus, tmp_path / "qa")
    cache = tmp_path / "qa" / CACHE_NAME
    lines = cache.read_text(encoding="utf-8").splitlines()
    lines[1] = "[" * 100_000 + "]" * 100_000
    cache.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with caplog.at_level(logging.WARNING, logger="benchmax.datagen"):
        async with MockModelServer(lines_as_pairs) as server:
            summary = await generate(server, corpus, tmp_path / "qa")
            assert len(server.requests) == 1  # only the bad line's chunk is redone
    assert summary.tasks_cached == 2
    assert any(
        f"{cache}:2: skipped, not a cache line (nested too deeply)" in record.getMessage()
        for record in caplog.records
    )
