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


def test_lone_surrogates_become_replacement_characters_and_print():
    out = clean("a\ud800b\udfffc")
    assert out == "a\ufffdb\ufffdc" and is_clean(out)
    out.encode("utf-8")  # printing a lone surrogate would raise UnicodeEncodeError


def test_an_unterminated_string_sequence_ends_at_its_line():
    assert clean("one \x1b]52;c;QUJD\ntwo\nthree") == "one \ntwo\nthree"
    assert clean("\x1bPq stray\nnext") == "\nnext"


def test_terminal_safe_keeps_only_the_consoles_own_sequences():
    from console.cli import terminal_safe

    assert terminal_safe("\x1b[2mthinking\x1b[0m") == "\x1b[2mthinking\x1b[0m"
    assert terminal_safe("\r\x1b[2KC1 measure: 3/10") == "\r\x1b[2KC1 measure: 3/10"
    out = terminal_safe("\x1b[2m" + "\x1b]52;c;QQ==\x07\x1b[31mred\x9b2J\x00" + "\x1b[0m")
    assert out == "\x1b[2mred\u2400\x1b[0m"


def test_safe_stream_cleans_every_write():
    import io

    from console.cli import SafeStream

    raw = io.StringIO()
    s = SafeStream(raw)
    print("x\x1b]0;title\x07y", file=s)
    s.write("\x1b[2J")
    assert raw.getvalue() == "xy\n" and s.getvalue() == "xy\n"  # other attributes pass through


@given(st.text(alphabet=st.sampled_from(list("ab\n\x1b[]P\\\x07\x9b\x9c\x9d;0") + ["\ud800"]), max_size=200))
def test_sequence_soup_comes_out_clean(s):
    from console.cli import terminal_safe

    assert is_clean(clean(s))
    out = terminal_safe(s)
    rest = out.replace("\x1b[2m", "").replace("\x1b[0m", "").replace("\r\x1b[2K", "")
    assert is_clean(rest)


def test_clean_handles_megabytes_of_worst_case_soup():
    """No pattern backtracks: these would take hours if one did (bench-free: no timing asserted)."""
    for soup in ("\x1b]" * 1_000_000, "\x1b[" + "0;" * 1_000_000, "\x9b" * 2_000_000, "\x00\x1b" * 1_000_000,
                 "\x1bP" + "x" * 2_000_000):
        assert is_clean(clean(soup))


INVISIBLE = (
    [chr(c) for c in range(0x200B, 0x2010)]  # zero-width space, joiners, direction marks
    + ["\u2028", "\u2029"]  # line and paragraph separators
    + [chr(c) for c in range(0x202A, 0x202F)]  # bidi embeddings and overrides
    + [chr(c) for c in range(0x2060, 0x2065)]  # word joiner, invisible operators
    + [chr(c) for c in range(0x2066, 0x206A)]  # bidi isolates
    + ["\ufeff"]  # byte-order mark / zero-width no-break space
)


def test_zero_width_and_bom_characters_are_made_visible():
    """``llama\\u200b`` and ``llama`` are different ids and must not look the same."""
    for ch in INVISIBLE:
        out = clean(f"a{ch}b")
        assert out == ("a\u240ab" if ch in "\u2028\u2029" else "a\ufffdb"), (hex(ord(ch)), out)
        assert not is_clean(f"a{ch}b") and is_clean(out)
    assert clean("\ufeffmodel") == "\ufffdmodel"
    assert one_line("llama\u200b-8b") != one_line("llama-8b")
    assert plain("x\u2060y").plain == "x\ufffdy"
