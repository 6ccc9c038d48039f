"""A log line's template, and answers kept per template: what makes a log flood cheap to test.

A flood is mostly lines of a few templates that differ only in their numbers (vLLM's throughput line,
NCCL's channel lines, a traceback printed by every rank). A test whose answer cannot be lost by
deleting digits (a substring without digits, a pattern whose digits are optional) asks it once per
template, the line folded to lower-case ASCII without its digits, and keeps the answer: a line whose
template was seen costs one dictionary look-up, not a walk of its characters. The answer is about the
template, so for a line it may only say "look" too often (``no1 x`` has the template of ``no x``),
never too rarely: the callers check the line itself where it says "look".
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Callable
from typing import Generic, TypeVar

V = TypeVar("V")

# one C pass: upper-case ASCII to lower, digits deleted (bytes.translate's delete argument)
_FOLD = bytes.maketrans(b"ABCDEFGHIJKLMNOPQRSTUVWXYZ", b"abcdefghijklmnopqrstuvwxyz")
DIGIT_BYTES = b"0123456789"
NO_DIGITS = str.maketrans("", "", "0123456789")  # the same deletion for a key or a word (str.translate)
KEPT = 8192  # templates whose answers are kept (a flood has a few; unique lines replace them) ...
KEPT_CHARS = 1024  # ... each at most this long: a hostile flood of unique 16 KiB lines keeps ~8 MiB, not 128
LAST_CHARS = 4 * 2**20  # the last blob's templates are kept up to this size (a flood's slice is ~0.5 MiB)


def templates(blob: str) -> list[str]:
    """The template of each line of ``blob`` (lines joined by newlines): lower-case, without digits,
    each non-ASCII character one ``?`` (so a walk's offsets still count lines). The last blob's are
    kept: a batch is masked, then classified, and the masker nearly always leaves it as it was, so the
    second ask costs one comparison of the text (the list returned is shared: never change it)."""
    seen, out = _LAST[0]  # (one tuple read and written whole: a thread sees a blob with its own list)
    if blob == seen:
        return out
    out = blob.encode("ascii", "replace").translate(_FOLD, DIGIT_BYTES).decode("ascii").split("\n")
    if len(blob) <= LAST_CHARS:  # (a hostile batch of giant lines is not held on to)
        _LAST[0] = (blob, out)
    return out


_LAST: list[tuple[str | None, list[str]]] = [(None, [])]


class TemplateMemo(Generic[V]):
    """``memo(templates)`` -> one answer a template, ``judge`` asked only about templates not seen
    (each once, all of them in one call: it may walk them joined) and its answers kept."""

    def __init__(self, judge: Callable[[list[str]], list[V]]) -> None:
        self._judge = judge
        self._kept: dict[str, V] = {}

    def __call__(self, lines: list[str]) -> list[V]:
        got = list(map(self._kept.get, lines))
        if None not in got:
            return got  # type: ignore[return-value]
        new = list(dict.fromkeys(itertools.compress(lines, map(operator.is_, got, itertools.repeat(None)))))
        learned = dict(zip(new, self._judge(new), strict=True))
        keep = {t: v for t, v in learned.items() if len(t) <= KEPT_CHARS}
        if len(self._kept) + len(keep) > KEPT:
            self._kept.clear()
        if len(keep) <= KEPT:
            self._kept.update(keep)
        return [g if g is not None else learned[t] for t, g in zip(lines, got, strict=True)]

    def forget(self) -> None:
        """Every kept answer dropped (a benchmark's cold start)."""
        self._kept.clear()
