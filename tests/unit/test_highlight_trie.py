"""The log highlighter's literal alternations are trie-shaped patterns (``markers._literals``): they
colour exactly what the plain longest-first alternation coloured, on every log of the fixtures and the
held-out set, on the anchors themselves and on words that share their prefixes."""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from console.catalogue import markers
from console.catalogue.first_of import Literals
from console.catalogue.markers import EXCEPTION_GATE, EXCEPTION_TYPE, FATAL_ANCHORS, READY_MARKERS, TRACEBACK

ROOT = Path(__file__).resolve().parents[2]
CORPUS = sorted((ROOT / "tests/fixtures/logs").glob("*.log")) + sorted((ROOT / "bench/heldout").rglob("*.log"))
READY = (*READY_MARKERS.values(), "Init COMPLETE")
ERROR_WORDS = FATAL_ANCHORS + ("NCCL WARN", "timed out", "failed")


def _alternation(words) -> str:  # what the highlighter used before: every word, longest first
    return "|".join(re.escape(w) for w in sorted(set(words), key=len, reverse=True))


OLD_READY = re.compile(_alternation(READY))
OLD_ERROR = re.compile(r"\b(?:ERROR|CRITICAL|FATAL)\b|" + re.escape(TRACEBACK) + r"|" + EXCEPTION_TYPE + r"|"
                       r"\[E\d{3,4}[ \]]|" + _alternation(ERROR_WORDS))
NEW_READY, NEW_ERROR = markers.HIGHLIGHTS[2][0], markers.HIGHLIGHTS[4][0]


def _spans(rx: re.Pattern[str], line: str) -> list[tuple[int, int]]:
    return [m.span() for m in rx.finditer(line)]


def _corpus() -> list[str]:
    lines = [x for p in CORPUS for x in p.read_text(errors="replace").splitlines()]
    rng = random.Random(7)
    words = list(ERROR_WORDS) + list(READY)
    for w in words:  # each anchor, a prefix of it, it run into another one, in a line
        cut = w[: max(1, len(w) - rng.randrange(1, 4))]
        lines += [w, cut, f"x {w} y", f"{cut}{rng.choice(words)}", w + w, f"{w.lower()} {w.upper()}"]
    return lines


def test_the_corpus_is_there():
    assert len(CORPUS) > 100 and NEW_ERROR.pattern != OLD_ERROR.pattern


@pytest.mark.parametrize(("old", "new"), [(OLD_READY, NEW_READY), (OLD_ERROR, NEW_ERROR)], ids=["ready", "error"])
def test_trie_patterns_colour_what_the_alternations_did(old, new):
    lines = _corpus()
    assert sum(1 for x in lines if _spans(old, x)) > 10  # (the corpus does hold what they colour)
    for line in lines:
        assert _spans(new, line) == _spans(old, line), line


def test_the_trie_of_a_few_words():
    rx = re.compile(markers._literals(["ab", "abc", "b", "abd"]))
    assert [m.group() for m in rx.finditer("abcab abd b xab")] == ["abc", "ab", "abd", "b", "ab"]


def test_the_warning_alternation_searched_part_by_part_colours_what_the_one_pattern_did():
    new = markers.HIGHLIGHTS[3][0]
    old = re.compile(new.pattern)
    lines = _corpus() + ["WARNING WARN xWARN WARNx via NET/Socket/0 Using network Socket WARN", "WARNWARN WARN"]
    assert sum(1 for x in lines if _spans(old, x)) > 10
    for line in lines:
        assert _spans(new, line) == _spans(old, line), line


def test_first_of_overlapping_parts_yield_what_the_alternation_yields():
    # parts that overlap and a prefilter that finds more than its part: the leftmost position wins,
    # then the first alternative that matches there, then the search goes on after that match
    from console.catalogue.first_of import FirstOf, Part

    rx = FirstOf([Part(r"\bab\b", r"ab"), Part(r"abc"), Part(r"b+c"), Part(r"c")])
    rng = random.Random(3)
    for _ in range(3000):
        line = "".join(rng.choice("abc ") for _ in range(rng.randrange(0, 30)))
        assert _spans(rx, line) == _spans(re.compile(rx.pattern), line), line


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="abcdx ", max_size=40), st.integers(0, 40))
def test_the_walk_finds_where_the_trie_pattern_would(text, pos):
    # Literals: an Aho-Corasick walk that yields by end, asked for the leftmost start: it must find the
    # position re.search finds for the same words, overlapping and nested ones included
    words = ["ab", "abc", "b", "abd", "cdab", "dd", "x a"]
    part = Literals(markers._literals(words), words)
    m = re.compile(markers._literals(words)).search(text, pos)
    assert part.search(text, pos) == (None if m is None else m.start())


EXCEPTION_LINES = ["RuntimeError: x", "a ValueError", "Exception", "torch.cuda.OutOfMemoryError: y", "x SystemExit",
                   "no such thing", "error: lower case", "KeyboardInterrupt", "xValueError .Error a.b.CError",
                   "_x.9Error 9.aError ValueErrorError é.ÉtatError", "A" * 300 + "Error " + "b." * 200 + "KeyError"]


def test_a_line_without_the_gate_words_skips_the_exception_pattern():
    from console.catalogue.first_of import RunPart
    part = RunPart(EXCEPTION_TYPE, gate=EXCEPTION_GATE)
    for line in EXCEPTION_LINES:
        for pos in range(0, len(line) + 1, 7):
            m = re.compile(EXCEPTION_TYPE).search(line, pos)
            assert part.search(line, pos) == (None if m is None else m.start()), (line, pos)


@settings(max_examples=500, deadline=None)
@given(st.lists(st.sampled_from(["Error", "Exception", "SystemExit", "A", "b", "_", "9", ".", " ", ":", "é", "x" * 70]),
                max_size=30).map("".join), st.integers(0, 200))
def test_the_exception_part_finds_where_its_pattern_would(text, pos):
    # RunPart: from a gate word back to the start of its run, tried there once; the leftmost start
    # re.search finds, from any position (inside a run, or just after one)
    from console.catalogue.first_of import RunPart
    m = re.compile(EXCEPTION_TYPE).search(text, pos)
    assert RunPart(EXCEPTION_TYPE, gate=EXCEPTION_GATE).search(text, pos) == (None if m is None else m.start())


def _every_class(line: str) -> list[tuple[int, int, str]]:  # every class searched, none skipped
    return [(m.start(), m.end(), kind) for rx, kind in markers.HIGHLIGHTS for m in rx.finditer(line)]


def test_every_class_but_the_prefix_says_which_literals_its_matches_hold():
    # (a class that does not say is searched on every line: correct, but the flood pays for it)
    assert [kind for rx, kind in markers.HIGHLIGHTS if getattr(rx, "needs", None) is None] == ["prefix"]


def test_a_class_skipped_for_want_of_its_literals_had_nothing_to_colour():
    lines = _corpus() + EXCEPTION_LINES + ["[E123] x", "[E12 3] [E1234]", "WARN9 x", "via NET/Socket9", "é ERROR é"]
    assert sum(1 for x in lines if len({k for _s, _e, k in _every_class(x)}) > 1) > 20
    for line in lines:
        assert markers.highlight(line) == _every_class(line), line
    markers._CLASSES.forget()  # (the same again, every form new: the walk, not the kept answers)
    for line in lines[:2000]:
        assert markers.highlight(line) == _every_class(line), line


PIECES = ["ERROR", "WARN", "WARNING", "Error", "Exception", "[E", "123", "] ", "via NET/Socket", "Traceback",
          "Traceback (most recent call last)", "timed out", "failed", "NCCL WARN", "é", "x", " ", ":", "1"]


@settings(max_examples=500, deadline=None)
@given(st.lists(st.sampled_from(PIECES + list(FATAL_ANCHORS[:20])), max_size=12).map("".join))
def test_the_skipping_highlighter_colours_what_searching_every_class_colours(line):
    # digits inside a literal ("[E123]", anchors with numbers) and non-ASCII characters beside them:
    # the digit-free form a line's classes are found in must never lose a literal the line holds
    assert markers.highlight(line) == _every_class(line)
