"""``ps`` rows of the process list, row by row: a row that does not read (a cut line, a number out of
range, a missing start time) costs that row only; the identity read and the words the station-side
check compares."""

from __future__ import annotations

import hashlib
import subprocess

import pytest

from console.probes.processes import parse_identity, parse_ps
from console.remote.cmdlines.processes import (
    identity_fingerprint,
    identity_words,
    process_identity,
    signal_if_same,
)

GOOD = "   4242 ops 0.4 2203648 0::/user.slice/s.scope Sat Dec  5 14:12:43 2026 python3 a.py  --x"


def test_a_good_row_reads_with_its_start_time():
    row = parse_ps(GOOD)[4242]
    assert row.started == "Sat Dec  5 14:12:43 2026" and row.command == "python3 a.py  --x" and row.rss_mib == 2152.0


def test_one_bad_row_costs_that_row_only():
    bad = [
        "   17 ops 1.2.3 100 0::/x Sat Dec  5 14:12:43 2026 cut",  # not a number
        "   18 ops 1e999 100 0::/x Sat Dec  5 14:12:43 2026 huge",
        "   19 ops 0.1 " + "9" * 400 + " 0::/x Sat Dec  5 14:12:43 2026 rss of 400 digits",
        "   " + "9" * 30 + " ops 0.1 100 0::/x Sat Dec  5 14:12:43 2026 a pid of 30 digits",
        "   0 ops 0.1 100 0::/x Sat Dec  5 14:12:43 2026 pid 0",
        "   20 ops 0.1 100 0::/x python3 no start time",
        "   21 ops -0.1 100 0::/x Sat Dec  5 14:12:43 2026 negative",
        "\x00\xff garbage",
        "",
    ]
    rows = parse_ps("\n".join([*bad, GOOD]))
    assert list(rows) == [4242]


def test_the_identity_row_and_what_the_check_compares():
    got = parse_identity("Sl   Sat Dec  5 14:12:43 2026 python3 a.py  --x\n")
    assert got is not None and got.stat == "Sl" and got.command == "python3 a.py  --x"
    assert parse_identity("") is None and parse_identity("Sl python3 a.py\n") is None
    assert identity_words(got.started, got.command) == "Sat Dec 5 14:12:43 2026 python3 a.py --x"
    assert process_identity(4242) == "LC_ALL=C ps -ww -o stat=,lstart=,args= -p 4242; true"


def test_the_checked_signal_carries_a_hash_never_the_command_line():
    fp = identity_fingerprint("Sat Dec  5 14:12:43 2026", "serve --api-key sk-abcdefghijklmnopqrstu")
    assert fp == hashlib.sha256(b"Sat Dec 5 14:12:43 2026 serve --api-key sk-abcdefghijklmnopqrstu\n").hexdigest()
    cmd = signal_if_same(4242, "TERM", fp)
    assert "sk-" not in cmd and fp in cmd and cmd.endswith("else echo 'identity: same'; env kill -s TERM 4242; fi")
    with pytest.raises(ValueError):
        signal_if_same(4242, "TERM", "'; reboot; '")
    with pytest.raises(ValueError):
        signal_if_same(4242, "HUP", fp)


def test_the_station_side_hash_is_the_consoles():
    """The station's squeeze and sha256sum give the fingerprint the console computed (real bash)."""
    words = "Sat Dec  5 14:12:43 2026   python3\ta.py --x 'y'  "
    got = subprocess.run(["bash", "-c", "now=$(printf '%s' \"$1\" | tr -s ' \\t\\n\\r\\v\\f' ' '); now=${now# }; "
                          "now=${now% }; printf '%s\\n' \"$now\" | sha256sum", "-", words],
                         capture_output=True, text=True, check=True).stdout.split()[0]
    assert got == identity_fingerprint("Sat Dec  5 14:12:43 2026", "  python3\ta.py --x 'y'  ")
