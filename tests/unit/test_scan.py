"""The one-pass key scan finds exactly what checking every anchor on every line finds."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from console.catalogue.classify import DIAGNOSIS_ANCHORS, INDEX
from console.catalogue.scan import KeyIndex


def naive(index: KeyIndex, lines: list[str]) -> dict[int, list[str]]:
    out: dict[int, list[str]] = {}
    for i, line in enumerate(lines):
        found = [a for group in index.keys.values() for a in group if a in line]
        if found:
            out[i] = found
    return out


ANCHORS = sorted({a for g in INDEX.keys.values() for a in g})
piece = st.one_of(st.sampled_from(ANCHORS), st.text(max_size=12),
                  st.sampled_from(["é", "ﬁ", "İ", "\t", " ", "ERROR", "error", "Ü"]))
line = st.lists(piece, max_size=6).map("".join).map(lambda s: s.replace("\n", " "))


@settings(max_examples=300, deadline=None)
@given(st.lists(line, max_size=30))
def test_one_pass_equals_checking_every_anchor(lines):
    assert INDEX.hits(lines) == naive(INDEX, lines)


def test_non_ascii_before_a_key_keeps_offsets():
    ix = KeyIndex(["Error: boom", "CUDA out of memory"])
    lines = ["ünïcödé ✖ Error: boom", "", "日本語 CUDA out of memory", "error: boom (wrong case)"]
    assert ix.hits(lines) == {0: ["Error: boom"], 2: ["CUDA out of memory"]}


def test_the_markers_keys_leave_the_diagnosis_keys_as_they_were():
    # the diagnosis keeps its keys, their order and each line's anchor order; the markers' keys start
    # with letters the diagnosis keys start with (the walk's cost grows with the keys' first letters)
    diagnosis = KeyIndex(DIAGNOSIS_ANCHORS)
    wanted = set(DIAGNOSIS_ANCHORS)
    shared = [(k, tuple(a for a in g if a in wanted)) for k, g in list(INDEX.keys.items())[:len(diagnosis.keys)]]
    assert shared == list(diagnosis.keys.items())
    assert {k[0] for k in INDEX.keys} == {k[0] for k in diagnosis.keys}


def test_lines_of_one_template_are_judged_each_on_its_own_digits():
    # the walk is kept per template (the line without its digits): lines that differ only in their
    # digits share it, yet each line's anchors are its own, a key holding digits included
    ix = KeyIndex(["NCCL_IB_DISABLE set by environment to 1", "no such", "Error 42"])
    lines = ["NCCL_IB_DISABLE set by environment to 1", "NCCL_IB_DISABLE set by environment to 0",
             "no such file", "no1 such file", "Error 42 here", "Error 24 here", "Error 42 here"]
    want = {0: ["NCCL_IB_DISABLE set by environment to 1"], 2: ["no such"], 4: ["Error 42"], 6: ["Error 42"]}
    assert ix.hits(lines) == want
    assert ix.hits(list(reversed(lines))) == {len(lines) - 1 - i: a for i, a in want.items()}  # seen before
    assert ix.hits(lines) == want


def test_a_batch_of_more_templates_than_are_kept_is_still_scanned_whole(monkeypatch):
    from console import line_templates
    monkeypatch.setattr(line_templates, "KEPT", 4)
    ix = KeyIndex(["Error: boom"])
    lines = [f"{c} Error: boom" if i % 3 == 0 else f"{c} fine" for i, c in enumerate("abcdefghij")]
    want = {i: ["Error: boom"] for i in range(0, 10, 3)}
    assert ix.hits(lines) == want == ix.hits(lines)
    assert ix.hits(lines[:2]) == {0: ["Error: boom"]}


def test_a_key_of_digits_alone_is_refused():
    import pytest
    with pytest.raises(ValueError):
        KeyIndex(["2602"], key_words=())


def test_a_template_is_the_folded_line_without_its_digits_and_the_last_blob_is_not_folded_twice():
    from console.line_templates import templates
    blob = "Engine 000: Avg 385.9 TOKENS/s\nünï 12 Error\n"
    first = templates(blob)
    assert first == ["engine : avg . tokens/s", "?n?  error", ""]
    assert templates("".join(["Engine 000: Avg 385.9 TOKENS/s\n", "ünï 12 Error\n"])) is first  # equal text
    assert templates("Engine 001") == ["engine "]


def test_long_templates_are_judged_but_not_kept():
    from console.line_templates import KEPT_CHARS, TemplateMemo
    asked: list[list[str]] = []

    def judge(new: list[str]) -> list[int]:
        asked.append(new)
        return [len(t) for t in new]

    memo = TemplateMemo(judge)
    long, short = "x" * (KEPT_CHARS + 1), "y"
    assert memo([long, short, long]) == [KEPT_CHARS + 1, 1, KEPT_CHARS + 1]
    assert memo([long, short]) == [KEPT_CHARS + 1, 1]
    assert asked == [[long, short], [long]]  # the short one was kept, the long one asked again
