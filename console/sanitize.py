"""The one sanitizer for outside text: nothing a station, a server or a file says reaches the terminal
as a control or escape sequence, and nothing of it is ever parsed as Rich markup.

Outside text is model output (content, reasoning, tool calls), model ids, server error bodies, metric
labels, container logs, remote command output, evidence lines and config values echoed back. A
hostile server streaming ``ESC ] 52 ; c ; <base64> BEL`` would otherwise write the operator's
clipboard on every repaint. Complete escape sequences (CSI, OSC, DCS, SOS, PM, APC, in their 7-bit
and 8-bit forms, and two-byte ``ESC x``) are removed; every other C0 control except tab and newline,
DEL, C1 controls, the bidirectional overrides and the invisible format characters (zero-width space,
joiners and direction marks U+200B..U+200F, word joiner and invisible operators U+2060..U+2064, the
byte-order mark U+FEFF, line and paragraph separators U+2028/2029) become a visible placeholder
(``␀``, ``␛``, ``␊`` for the separators, ``�``) so the operator sees that something was there: ``llama\u200b`` and ``llama``
are different model ids and must not look the same. A lone surrogate (what a JSON ``\\ud800`` decodes to)
becomes ``�`` too: printing it would raise ``UnicodeEncodeError``. An unterminated string
sequence ends at the end of its line, so one stray ``ESC ]`` never hides the lines after it. Every
pattern is a character class or a single bounded run: linear in the length of the text (log lines
can be megabytes).

``--json`` output keeps the data as it came: JSON escapes it.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # (imported where used: the simulator's shims never draw)
    from rich.text import Text

# A complete escape sequence: CSI (ESC [ or 0x9B) params, intermediates, final byte; a string
# sequence OSC/DCS/SOS/PM/APC (ESC ] P X ^ _ or 0x9D 0x90 0x98 0x9E 0x9F) up to BEL or ST (ESC \ or
# 0x9C) or, unterminated, to the end of its line; any other two-byte ``ESC x``.
_SEQUENCE = re.compile(
    r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]?"
    r"|(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x9c\n]*(?:\x07|\x1b\\|\x9c)?"
    r"|\x1b[ -~]?"
)
# What is left after sequences: C0 (but tab, newline), DEL, C1, zero-width and direction marks, line and
# paragraph separators, bidi embeddings/overrides/isolates, word joiner and invisible operators, lone
# surrogates, the byte-order mark.
_CONTROL = re.compile(
    r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2060-\u2064\u2066-\u2069"
    r"\ud800-\udfff\ufeff]"
)


def _placeholder(m: re.Match[str]) -> str:
    ch = m.group()
    code = ord(ch)
    if code < 0x20:
        return chr(0x2400 + code)  # the Control Pictures block: ␀ ␇ ␍ ␛ ...
    if code == 0x7F:
        return "\u2421"  # ␡
    if code in (0x2028, 0x2029):
        return "\u240a"  # ␊: a line or paragraph separator is a line break, not nothing
    return "\ufffd"


def clean(text: str) -> str:
    """``text`` with escape sequences removed and other controls shown as placeholders.

    Tabs and newlines are kept; a CR that ends a line (CRLF) is dropped.
    """
    if not _CONTROL.search(text):
        return text
    if "\r" in text:
        text = text.replace("\r\n", "\n")
        if text.endswith("\r"):
            text = text[:-1]
    text = _SEQUENCE.sub("", text)
    return _CONTROL.sub(_placeholder, text)


# ``_SEQUENCE``'s 7-bit forms only, led by the literal ESC the regex engine finds fast (ten times faster
# on a coloured log line): the same matches wherever the text is ASCII.
_ESC_SEQUENCE = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]?|[\]PX^_][^\x07\x1b\x9c\n]*(?:\x07|\x1b\\|\x9c)?|[ -~]?)")
_C1_START = re.compile(r"[\x90\x98\x9b\x9d\x9e\x9f]")  # the 8-bit forms' introducers


def strip_escapes(text: str) -> str:
    """``text`` with its escape sequences (colour codes above all) removed and nothing else changed: what a
    log line says, for matching it against the catalogue. The same sequences ``clean`` removes, so a line
    is matched on what the screen shows of it. ``text`` itself (the same object) when it holds none."""
    if text.isascii():
        return _ESC_SEQUENCE.sub("", text) if "\x1b" in text else text
    if "\x1b" in text or _C1_START.search(text):
        return _SEQUENCE.sub("", text)
    return text


def one_line(text: str, limit: int | None = None) -> str:
    """``clean`` for a one-line place (a title, a table cell, a notification, a stderr message):
    runs of whitespace become single spaces, and beyond ``limit`` characters the text is clipped with a
    visible marker."""
    text = " ".join(clean(text).split())
    return clip(text, limit) if limit is not None else text


def clip_mark(cut: int) -> str:
    """The visible mark a clipped text ends with: how many characters were cut."""
    return f"… [+{cut:,} chars]"


def clip(text: str, limit: int) -> str:
    """At most ``limit`` characters plus a marker saying how much was cut (never silently). A text that
    already ends with a clip mark (a stream clipped the line on the way in) keeps one mark, counting
    everything cut from the original."""
    if len(text) <= limit:
        return text
    head, cut = text, 0
    if text.endswith(" chars]") and (at := text.rfind("… [+", len(text) - 40)) >= 0:
        number = text[at + 4:-7].replace(",", "")
        if number.isdigit():
            head, cut = text[:at], int(number)
    keep = min(limit, len(head))
    return head[:keep] + clip_mark(cut + len(head) - keep)


def plain(text: str, style: str = "") -> Text:
    """Outside text as a Rich ``Text``: sanitized and never interpreted as markup."""
    from rich.text import Text

    return Text(clean(text), style=style)


def is_clean(text: str) -> bool:
    """True when ``text`` holds nothing ``clean`` would change (for tests and assertions)."""
    return _CONTROL.search(text) is None
