"""``generate_qa``'s stages, each against the mock model server: type targets, multi-hop
linking, the trivial-retrieval filter, the grounding check, one regeneration with feedback,
style rewrites, noise, and resuming with all of them on."""

from __future__ import annotations

import json
import random
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from benchmax.auth import StaticBearerAuth
from benchmax.datagen import (
    CACHE_NAME,
    Chunk,
    Document,
    GenerationConfig,
    QAPair,
    ReplyShapeError,
    add_noise,
    build_grounding_prompt,
    generate_qa,
    interleave,
    local_drop_reason,
    parse_grounding_reply,
    parse_style_reply,
    parse_weights,
    related_chunks,
    repeated_sentence,
)
from benchmax.rewards import Judge, NgramDiversityConfig
from benchmax.testing import MockModelServer, load_policy, message_text

REPO = Path(__file__).resolve().parents[2]
_PASSAGE = re.compile(r"<passage>\n(.*?)\n</passage>", re.DOTALL)
_CHECKED = re.compile(r'^(\d+)\. question: ("(?:[^"\\]|\\.)*") answer: ', re.MULTILINE)
_STYLED = re.compile(r"^\d+\. \[(\w+)\] (.*)$", re.MULTILINE)


def prompt_of(body: dict[str, Any]) -> str:
    return message_text(body["messages"][-1]["content"])


def kind_of(prompt: str) -> str:
    if prompt.startswith("Task: check that answers"):
        return "ground"
    if prompt.startswith("Task: rewrite questions"):
        return "style"
    if "Some pairs you wrote for this request were rejected" in prompt:
        return "regenerate"
    return "write"


class Writer:
    """A scripted model: passage lines ``question => answer`` are the pairs it writes
    (``question => answer => again-question`` gives a different pair when asked again);
    the grounding verdict is false for answers in ``unsupported``; styles prefix the tag."""

    def __init__(
        self,
        unsupported: frozenset[str] = frozenset(),
        style_reply: Any = None,
        again: dict[str, str] | None = None,
    ) -> None:
        self.unsupported = unsupported
        self.again = again or {}
        self.style_reply = style_reply
        self.prompts: list[tuple[str, str]] = []

    def __call__(self, body: dict[str, Any]) -> str:
        prompt = prompt_of(body)
        kind = kind_of(prompt)
        self.prompts.append((kind, prompt))
        if kind == "ground":
            verdicts = [
                {"pair": int(number), "supported": json.loads(q) not in self.unsupported}
                for number, q in _CHECKED.findall(prompt)
            ]
            return json.dumps({"verdicts": verdicts})
        if kind == "style":
            if self.style_reply is not None:
                return json.dumps(self.style_reply)
            styled = [f"<{style}> {q}" for style, q in _STYLED.findall(prompt)]
            return json.dumps({"questions": styled})
        pairs = []
        for passage in _PASSAGE.findall(prompt):
            for line in passage.splitlines():
                parts = [part.strip() for part in line.split("=>")]
                if len(parts) < 2:
                    continue
                question = parts[2] if kind == "regenerate" and len(parts) > 2 else parts[0]
                if kind == "regenerate":
                    question = self.again.get(question, question)
                pairs.append({"question": question, "answer": parts[1]})
        return json.dumps({"pairs": pairs})

    def of(self, kind: str) -> list[str]:
        return [prompt for k, prompt in self.prompts if k == kind]


def write(directory: Path, documents: dict[str, str]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    for name, text in documents.items():
        (directory / name).write_text(text)
    return directory


def read_rows(directory: Path) -> list[dict[str, Any]]:
    rows = []
    for name in ("train.jsonl", "eval.jsonl"):
        rows += [json.loads(line) for line in (directory / name).read_text().splitlines()]
    return rows


async def generate(server: MockModelServer, corpus: Path, output: Path, **options: Any) -> Any:
    judge = Judge(model="writer", base_url=server.base_url, auth=StaticBearerAuth("k"))
    return await generate_qa(corpus, output, judge, GenerationConfig(**options))


# --- planning: type targets -------------------------------------------------------------


def test_interleave_spreads_types_to_the_nearest_slot() -> None:
    weights = parse_weights("lookup=0.5,multi_hop=0.3,reasoning=0.2", LOOKUP_ORDER, "types")
    chosen = interleave(weights, 30)
    assert Counter(chosen) == {"lookup": 15, "multi_hop": 9, "reasoning": 6}
    for end in range(1, 31):  # every prefix is within one slot of its share
        counts = Counter(chosen[:end])
        assert all(abs(counts[name] - share * end) < 1 for name, share in weights.items())


LOOKUP_ORDER = ("lookup", "multi_hop", "reasoning")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("lookup=x", "not NAME=WEIGHT"),
        ("trivia=1", "unknown types 'trivia'"),
        ("lookup=-1,reasoning=1", "non-negative"),
        ("lookup=0", "at least one positive weight"),
        ("lookup=1,lookup=2", "given twice"),
    ],
)
def test_bad_type_targets_are_refused(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_weights(text, LOOKUP_ORDER, "types")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"types": {"trivia": 1.0}}, "unknown question types"),
        ({"styles": ("natural", "poetic")}, "styles must be one or more of"),
        ({"styles": ()}, "styles must be one or more of"),
        ({"noise": 1.5}, "noise"),
        ({"trivial_overlap": 0}, "trivial_overlap"),
    ],
)
def test_stage_settings_are_validated(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        GenerationConfig(**options)


async def test_question_types_reach_their_targets(tmp_path: Path) -> None:
    words = ["apple", "river", "copper", "violin", "glacier"]
    corpus = write(
        tmp_path / "corpus", {f"d{i}.txt": f"Fact {w} is here." for i, w in enumerate(words)}
    )
    asked: Counter[str] = Counter()

    def policy(body: dict[str, Any]) -> str:
        prompt = prompt_of(body)
        if kind_of(prompt) == "ground":
            return json.dumps({"verdicts": [{"pair": 1, "supported": True}]})
        kind = re.search(r"question type: (\w+)", prompt)
        assert kind is not None and "Write up to 1 question-answer pairs" in prompt
        asked[kind[1]] += 1
        fact = _PASSAGE.findall(prompt)[0].split()[1]
        question = f"{fact} {kind[1]}?"  # short and distinct: no near-duplicates
        return json.dumps({"pairs": [{"question": question, "answer": fact}]})

    async with MockModelServer(policy) as server:
        summary = await generate(
            server, corpus, tmp_path / "qa", pairs_per_chunk=2, eval_fraction=0,
            types={"lookup": 1, "reasoning": 1},
        )  # fmt: skip
    assert asked == {"lookup": 5, "reasoning": 5}  # one slot of each type per chunk
    assert summary.type_targets == {"lookup": 0.5, "reasoning": 0.5}
    assert summary.types == {"lookup": 5, "reasoning": 5}
    assert summary.achieved() == {"lookup": 0.5, "reasoning": 0.5}
    assert Counter(row["type"] for row in read_rows(tmp_path / "qa")) == summary.types
    assert summary.to_json()["types_achieved"] == {"lookup": 0.5, "reasoning": 0.5}


# --- multi-hop over linked chunks -------------------------------------------------------


def chunk(name: str, text: str, index: int = 0) -> Chunk:
    return Chunk(document=Document(name, text), index=index, text=text)


def test_related_chunks_prefers_a_lexically_close_chunk_of_another_document() -> None:
    chunks = [
        chunk("mars.md", "Mars has two moons, Phobos and Deimos, and a thin atmosphere."),
        chunk("mars.md", "Phobos orbits Mars closer than any other moon orbits its planet.", 1),
        chunk("moons.md", "Deimos and Phobos are small irregular moons of Mars."),
        chunk("bread.md", "Sourdough bread rises with wild yeast and lactic bacteria."),
    ]
    assert related_chunks(chunks) == [2, 2, 0, None]
    assert related_chunks(chunks[:1]) == [None]


async def test_multi_hop_questions_cite_the_related_chunk(tmp_path: Path) -> None:
    corpus = write(
        tmp_path / "corpus",
        {
            "a.txt": "Who discovered the comet Halley? => Edmond Halley",
            "b.txt": "When did the comet Halley last pass? => 1986",
            "c.txt": "What colour is the sourdough crust? => brown",
            "d.txt": "How long does the sourdough rise? => twelve hours",
        },
    )
    writer = Writer()
    async with MockModelServer(writer) as server:
        summary = await generate(
            server, corpus, tmp_path / "qa", pairs_per_chunk=1, types={"multi_hop": 1},
            eval_fraction=0, trivial_overlap=None,
        )  # fmt: skip
    rows = read_rows(tmp_path / "qa")
    assert rows and all(row["type"] == "multi_hop" for row in rows)
    partners = {frozenset(c["file"] for c in row["source"]["chunks"]) for row in rows}
    assert partners == {frozenset({"a.txt", "b.txt"}), frozenset({"c.txt", "d.txt"})}
    prompt = writer.of("write")[0]
    assert prompt.count("<passage>") == 2 and "need facts from BOTH passages" in prompt
    assert summary.types == {"multi_hop": len(rows)}


async def test_multi_hop_partners_stay_on_their_split_side(tmp_path: Path) -> None:
    corpus = write(
        tmp_path / "corpus",
        {
            f"{name}.txt": f"{name}? => {name}\nThe comet is bright."
            for name in ("halley", "encke", "tempel", "borrelly", "hartley", "wild")
        },
    )
    async with MockModelServer(Writer()) as server:
        summary = await generate(
            server, corpus, tmp_path / "qa", pairs_per_chunk=1, types={"multi_hop": 1},
            eval_fraction=0.5, trivial_overlap=None,
        )  # fmt: skip
    sides = []
    for name in ("train.jsonl", "eval.jsonl"):
        rows = [json.loads(line) for line in (tmp_path / "qa" / name).read_text().splitlines()]
        sides.append({c["file"] for row in rows for c in row["source"]["chunks"]})
    assert sides[0] and sides[1] and not sides[0] & sides[1]
    assert summary.eval_documents == 3


async def test_a_multi_hop_slot_without_a_related_chunk_is_counted(tmp_path: Path) -> None:
    corpus = write(tmp_path / "corpus", {"a.txt": "Who? => Ada\nWhat? => engine"})
    async with MockModelServer(Writer()) as server:
        summary = await generate(
            server, corpus, tmp_path / "qa", pairs_per_chunk=2,
            types={"lookup": 1, "multi_hop": 1}, trivial_overlap=None,
        )  # fmt: skip
        assert len(server.requests) == 2  # the lookup question and its grounding check
    assert summary.dropped == {"no_related_chunk": 1, "over_limit": 1}  # one asked, two written
    assert summary.types == {"lookup": 1} and summary.achieved()["multi_hop"] == 0


# --- the trivial-retrieval filter -------------------------------------------------------

SENTENCE = "The Magna Carta was sealed by King John at Runnymede in 1215."


def test_repeated_sentence_finds_a_question_copying_its_sentence() -> None:
    copied = "The Magna Carta was sealed by King John at Runnymede in which year?"
    assert repeated_sentence(copied, [f"Intro. {SENTENCE} Outro."], 0.75) == SENTENCE
    rephrased = "In what year did King John put his seal on the Magna Carta?"
    assert repeated_sentence(rephrased, [SENTENCE], 0.75) is None
    assert repeated_sentence("Mars has two moons?", ["Mars has two moons."], 0.5) is None


def test_local_checks_in_order() -> None:
    def reason(question: str, answer: str, kind: str = "lookup") -> str | None:
        return local_drop_reason(
            QAPair(question, answer), [SENTENCE], question_type=kind, max_answer_words=3,
            min_answer_support=0.5, trivial_overlap=0.75,
        )  # fmt: skip

    assert reason("When did King John seal it?", "in the year twelve fifteen AD") == (
        "answer_too_long"
    )
    assert reason("When did King John seal it?", "1314") == "answer_not_in_chunk"
    assert reason("How long before 1300 was it sealed?", "85 years", "reasoning") is None
    assert reason(SENTENCE.replace("1215", "what year"), "1215") == "trivially_retrievable"
    assert reason("When did King John seal it?", "1215") is None


async def test_a_trivial_question_is_asked_again_with_the_reason(tmp_path: Path) -> None:
    copied = SENTENCE.replace("1215", "what year")
    corpus = write(tmp_path / "corpus", {"charter.txt": f"{SENTENCE}\n{copied} => 1215"})
    writer = Writer(again={copied: "When did King John seal it?"})
    async with MockModelServer(writer) as server:
        summary = await generate(server, corpus, tmp_path / "qa", grounding_check=False)
    (again,) = writer.of("regenerate")
    assert "repeats a sentence of the passage" in again and "Write up to 1 " in again
    assert [row["prompt"] for row in read_rows(tmp_path / "qa")] == ["When did King John seal it?"]
    assert summary.pairs_regenerated == 1 and summary.pairs_generated == 2
    assert summary.dropped == {}


# --- the grounding check and one regeneration -------------------------------------------


def test_grounding_prompt_and_reply() -> None:
    prompt = build_grounding_prompt([("a.txt", "Mars has two moons.")], [QAPair("N?", "two")])
    assert "From a.txt:\n<passage>\nMars has two moons.\n</passage>" in prompt
    assert '1. question: "N?" answer: "two"' in prompt
    reply = {"verdicts": [{"pair": 1, "supported": False, "reason": "no"}]}
    assert parse_grounding_reply(reply, 1)[0].supported is False
    with pytest.raises(ReplyShapeError, match="no verdict for pair 2"):
        parse_grounding_reply(reply, 2)
    with pytest.raises(ReplyShapeError, match='"supported"'):
        parse_grounding_reply({"verdicts": [{"pair": 1, "supported": "yes"}]}, 1)
    with pytest.raises(ReplyShapeError, match='"pair" number from 1 to 1'):
        parse_grounding_reply({"verdicts": [{"pair": 2, "supported": True}]}, 1)


async def test_an_ungrounded_answer_is_regenerated_once_then_dropped(tmp_path: Path) -> None:
    corpus = write(
        tmp_path / "corpus",
        {"a.txt": "Who built it? => Ada => Who designed it?\nWhat is it? => an engine => What?"},
    )
    writer = Writer(unsupported=frozenset({"Who built it?", "Who designed it?"}))
    async with MockModelServer(writer) as server:
        summary = await generate(server, corpus, tmp_path / "qa", trivial_overlap=None)
    grounds = writer.of("ground")
    assert len(grounds) == 2 and '"Who built it?"' in grounds[0]
    (again,) = writer.of("regenerate")
    assert '- "Who built it?" -> "Ada": the passages do not support the answer' in again
    assert [row["prompt"] for row in read_rows(tmp_path / "qa")] == ["What is it?"]
    assert summary.dropped == {"ungrounded": 1, "over_limit": 1}  # one asked, two written
    assert summary.pairs_regenerated == 1


async def test_without_regeneration_a_rejected_pair_is_dropped_at_once(tmp_path: Path) -> None:
    corpus = write(tmp_path / "corpus", {"a.txt": "Who built it? => Ada => Who designed it?"})
    writer = Writer(unsupported=frozenset({"Who built it?"}))
    async with MockModelServer(writer) as server:
        summary = await generate(
            server, corpus, tmp_path / "qa", trivial_overlap=None, regenerate=False
        )
    assert writer.of("regenerate") == [] and summary.dropped == {"ungrounded": 1}


async def test_an_unusable_grounding_reply_twice_drops_the_pairs_unchecked(tmp_path: Path) -> None:
    corpus = write(tmp_path / "corpus", {"a.txt": "Who built it? => Ada"})

    def policy(body: dict[str, Any]) -> str:
        if kind_of(prompt_of(body)) == "ground":
            return json.dumps({"verdicts": "all fine"})
        return Writer()(body)

    async with MockModelServer(policy) as server:
        summary = await generate(server, corpus, tmp_path / "qa", trivial_overlap=None)
        retry = prompt_of(server.requests[-1].body)
    assert 'previous reply could not be used: the object has no "verdicts" list' in retry
    assert summary.dropped == {"grounding_unchecked": 1} and summary.pairs_kept == 0


# --- styles and noise -------------------------------------------------------------------


async def test_questions_are_rewritten_into_their_styles(tmp_path: Path) -> None:
    corpus = write(tmp_path / "corpus", {f"d{i}.txt": f"Question {i}? => a{i}" for i in range(6)})
    writer = Writer()
    async with MockModelServer(writer) as server:
        summary = await generate(
            server, corpus, tmp_path / "qa", pairs_per_chunk=1, trivial_overlap=None,
            styles=("natural", "keyword", "expert"),
        )  # fmt: skip
    rows = read_rows(tmp_path / "qa")
    assert summary.styles == {"natural": 2, "keyword": 2, "expert": 2}
    for row in rows:
        if row["style"] == "natural":
            assert "original_prompt" not in row
        else:
            assert row["prompt"] == f"<{row['style']}> {row['original_prompt']}"
    assert all(
        "- keyword: a terse search query" in p for p in writer.of("style") if "[keyword]" in p
    )


@pytest.mark.parametrize(
    "style_reply",
    [{"questions": "none"}, {"questions": ["Which answer is a0 a1 a2 a3 a4 a5?"] * 6}],
)
async def test_a_failed_or_revealing_rewrite_keeps_the_natural_question(
    tmp_path: Path, style_reply: Any
) -> None:
    corpus = write(tmp_path / "corpus", {"d.txt": "Question? => a0"})
    async with MockModelServer(Writer(style_reply=style_reply)) as server:
        summary = await generate(
            server, corpus, tmp_path / "qa", pairs_per_chunk=1, trivial_overlap=None,
            styles=("keyword",),
        )  # fmt: skip
    assert [(r["prompt"], r["style"]) for r in read_rows(tmp_path / "qa")] == [
        ("Question?", "natural")
    ]
    assert summary.style_fallbacks == 1


def test_parse_style_reply() -> None:
    assert parse_style_reply({"questions": [" mars  moons "]}, 1) == ["mars moons"]
    with pytest.raises(ReplyShapeError, match="list of 2 strings"):
        parse_style_reply({"questions": ["one"]}, 2)
    with pytest.raises(ReplyShapeError, match="non-empty string"):
        parse_style_reply({"questions": [""]}, 1)


def test_noise_is_seeded_and_adds_a_typo_and_an_abbreviation() -> None:
    question = "How many years passed between the two voyages?"
    noisy, kinds = add_noise(question, random.Random(4))
    assert add_noise(question, random.Random(4)) == (noisy, kinds)
    assert kinds == ("abbreviation", "typo") and noisy != question
    assert "yrs" in noisy or "btwn" in noisy
    assert add_noise("Who?", random.Random(1)) == ("Who?", ())


async def test_noise_touches_about_its_share_of_prompts_never_answers(tmp_path: Path) -> None:
    corpus = write(
        tmp_path / "corpus",
        {f"d{i}.txt": f"How many years passed before voyage {i}? => {i}" for i in range(20)},
    )
    async with MockModelServer(Writer()) as server:
        summary = await generate(
            server, corpus, tmp_path / "qa", pairs_per_chunk=1, trivial_overlap=None,
            grounding_check=False, noise=0.5,
            dedupe=NgramDiversityConfig(n=3, similarity_threshold=0.99),  # near-alike on purpose
        )  # fmt: skip
    rows = read_rows(tmp_path / "qa")
    noisy = [row for row in rows if row["noise"]]
    assert summary.noisy_rows == len(noisy) and 3 <= len(noisy) <= len(rows) - 3
    for row in noisy:
        assert row["prompt"] != row["original_prompt"]
        assert row["ground_truth"] == re.search(r"voyage (\d+)", row["original_prompt"])[1]  # type: ignore[index]


# --- resuming, and the example mock through every stage ---------------------------------

EVERY_STAGE = {
    "types": {"lookup": 0.5, "multi_hop": 0.3, "reasoning": 0.2},
    "styles": ("natural", "keyword", "expert"),
    "noise": 0.3,
}


async def test_the_example_mock_exercises_every_stage_and_a_rerun_asks_nothing(
    tmp_path: Path,
) -> None:
    policy = load_policy(f"{REPO}/examples/corpus/policy.py:reply")
    async with MockModelServer(policy) as server:
        summary = await generate(server, REPO / "examples" / "corpus", tmp_path, **EVERY_STAGE)
        kinds = Counter(kind_of(prompt_of(request.body)) for request in server.requests)
    assert kinds.keys() == {"write", "ground", "regenerate", "style"}
    assert summary.tasks_retried > 0 and summary.pairs_regenerated > 0
    assert summary.dropped.get("trivially_retrievable", 0) > 0
    assert summary.dropped.get("duplicate_question", 0) > 0
    assert set(summary.types) == {"lookup", "multi_hop", "reasoning"}
    assert set(summary.styles) == {"natural", "keyword", "expert"}
    assert summary.noisy_rows > 0 and summary.eval_rows > 0
    for name, share in summary.achieved().items():
        assert abs(share - summary.type_targets[name]) < 0.2
    rows = read_rows(tmp_path)
    assert all(row["source"]["chunks"] for row in rows)
    assert any(len(row["source"]["chunks"]) == 2 for row in rows if row["type"] == "multi_hop")
    written = (tmp_path / "train.jsonl").read_bytes(), (tmp_path / "eval.jsonl").read_bytes()

    async with MockModelServer(policy) as server:
        again = await generate(server, REPO / "examples" / "corpus", tmp_path, **EVERY_STAGE)
        assert server.requests == []
    assert again.tasks_cached == again.tasks == summary.tasks
    assert again.to_json() | {"tasks_cached": 0} == summary.to_json()
    assert ((tmp_path / "train.jsonl").read_bytes(), (tmp_path / "eval.jsonl").read_bytes()) == (
        written
    )
    assert len((tmp_path / CACHE_NAME).read_text().splitlines()) == summary.tasks
