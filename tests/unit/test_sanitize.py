"""The one sanitizer: no control or escape sequence survives, printable text is untouched."""

from hypothesis import given
from hypothesis import strategies as st

from console.sanitize import clean, clip, is_clean, one_line, plain

HOSTILE = [
    "\x1b]52;c;cHduZWQ=\x07",  # OSC 52: write the clipboard (BEL-terminated)
    "\x1b]52;c;cHduZWQ=\x1b\\",  # ... ST-terminated
    "\x1b]0;owned title\x07",
    "\x1b[2J\x1b[H",  # clear screen, home
    "\x1bP+q544e\x1b\\",  # DCS
    "\x1b_APC payload\x1b\\",
    "\x9b31m",  # 8-bit CSI
    "\x9d0;title\x9c",  # 8-bit OSC
    "\x00\x07\x08\x7f\x85",
    "\u202egnp.exe",
]


def test_escape_sequences_are_removed_and_text_kept():
    assert clean("ok \x1b[31mred\x1b[0m done") == "ok red done"
    assert clean("a\x1b]52;c;QUJD\x07b") == "ab"
    assert clean("a\x1b]0;t\x1b\\b") == "ab"
    assert clean("line\r\n") == "line\n"
    assert clean("tab\tand\nnewline") == "tab\tand\nnewline"


def test_other_controls_become_visible_placeholders():
    assert clean("nul\x00here") == "nul\u2400here"
    assert clean("del\x7f") == "del\u2421"
    assert clean("c1\x85") == "c1\ufffd"
    assert clean("progress 10%\rprogress 20%") == "progress 10%\u240dprogress 20%"


def test_unterminated_string_sequence_is_dropped_to_the_end():
    assert clean("before\x1b]52;c;QUJDREVG") == "before"


def test_hostile_samples_leave_nothing_a_terminal_acts_on():
    for s in HOSTILE:
        out = clean("x" + s + "y")
        assert "\x1b" not in out and is_clean(out), repr(out)


def test_one_line_and_clip():
    assert one_line("a\nb\t c") == "a b c"
    assert one_line("x" * 50, limit=10) == "x" * 10 + "… [+40 chars]"
    assert clip("short", 10) == "short"


def test_plain_is_never_markup():
    t = plain("[/] [bold]not bold[/bold] \x1b[1m")
    assert t.plain == "[/] [bold]not bold[/bold] "
    assert not t.spans


@given(st.text())
def test_any_text_comes_out_clean(s):
    out = clean(s)
    assert is_clean(out)
    assert "\x1b" not in out
    if is_clean(s):
        assert out == s
