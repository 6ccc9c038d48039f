"""``dgx-console incidents`` end to end over a real ledger file: the table, the ``--json`` shape
(every documented key, strict JSON), ``--since``, ``show ID`` in text and JSON, and the exit codes
(1: no such incident; 2: bad input, a ledger from a newer console), with hostile text from the
stations (a verdict holding escape sequences) never reaching the terminal."""

from __future__ import annotations

import json
import sqlite3
import time

import pytest

from console.cli import main
from console.incidents.store import Ledger, default_path

INCIDENT_KEYS = {"id", "kind", "start", "end", "seconds", "stations", "verdict", "next_step", "bundle",
                 "bundle_bytes", "action", "service", "owner", "note"}
STALL_KEYS = {"start", "seconds", "stations", "running", "service"}


@pytest.fixture
def ledger(tmp_path, monkeypatch) -> Ledger:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    led = Ledger(default_path())
    now = time.time()
    old = led.open_incident("svc", "stuck", now - 3 * 86400, ["B"], "B: stuck in weight loading", "h: look")
    led.close_incident(old.id, now - 3 * 86400 + 60)
    new = led.open_incident("svc", "wedge", now - 600, ["A", "B"],
                            "wedged \x1b]52;c;ZXZpbA==\x07 for 0:42\x1b[2J", "h: hang evidence")
    led.update(new.id, bundle=str(tmp_path / "b.tar.gz"), bundle_bytes=13 * 1024, action="captured")
    led.close_incident(new.id, now - 500)
    led.add_stall("svc", now - 900, 12.4, ["A"], 16.0)
    return led


def run(argv, capsys) -> tuple[int, str, str]:
    try:
        rc = main(argv)
    except SystemExit as exc:
        rc = exc.code if isinstance(exc.code, int) else 2
    cap = capsys.readouterr()
    return rc, cap.out, cap.err


def test_json_lists_incidents_newest_first_with_every_key_and_the_stalls(ledger, capsys):
    rc, out, _err = run(["incidents", "--json"], capsys)
    obj = json.loads(out, parse_constant=lambda c: pytest.fail(f"non-strict JSON {c}"))
    assert rc == 0 and set(obj) == {"incidents", "stalls"}
    kinds = [i["kind"] for i in obj["incidents"]]
    assert kinds == ["wedge", "stuck"] and all(set(i) == INCIDENT_KEYS for i in obj["incidents"])
    wedge = obj["incidents"][0]
    assert wedge["seconds"] == 100.0 and wedge["stations"] == ["A", "B"] and wedge["action"] == "captured"
    assert wedge["bundle_bytes"] == 13 * 1024
    assert [set(s) for s in obj["stalls"]] == [STALL_KEYS] and obj["stalls"][0]["seconds"] == 12.4
    rc, out, _err = run(["incidents", "--json", "--since", "1h"], capsys)
    assert rc == 0 and [i["kind"] for i in json.loads(out)["incidents"]] == ["wedge"]


def test_the_table_and_show_say_it_in_words_and_no_escape_reaches_the_terminal(ledger, capsys):
    rc, out, _err = run(["incidents"], capsys)
    assert rc == 0 and out.splitlines()[0].split()[:4] == ["ID", "KIND", "START", "LENGTH"]
    assert "wedge" in out and "captured" in out and "1 stall" in out and "longest 12 s" in out
    assert "\x1b" not in out and "\x07" not in out
    iid = json.loads(run(["incidents", "--json"], capsys)[1])["incidents"][0]["id"]
    rc, out, _err = run(["incidents", "show", str(iid)], capsys)
    assert rc == 0 and out.startswith(f"incident {iid}: wedge on A, B") and "h: hang evidence" in out
    assert "\x1b" not in out and "\x07" not in out
    rc, out, _err = run(["incidents", "show", str(iid), "--json"], capsys)
    assert rc == 0 and json.loads(out)["id"] == iid


@pytest.mark.parametrize(("argv", "rc", "words"), [
    (["incidents", "show", "99"], 1, "no incident 99 in the ledger"),
    (["incidents", "show", "abc"], 2, "is not an incident id"),
    (["incidents", "--since", "last tuesday"], 2, "--since"),
])
def test_what_cannot_be_answered_is_one_line_with_its_exit_code(ledger, capsys, argv, rc, words):
    got, out, err = run(argv, capsys)
    assert got == rc and out == "" and words in err and len(err.strip().splitlines()) == 1, err


def test_a_ledger_from_a_newer_console_is_refused_in_one_line_and_left_as_it_is(ledger, capsys):
    with sqlite3.connect(ledger.path) as con:
        version = con.execute("PRAGMA user_version").fetchone()[0]
        con.execute(f"PRAGMA user_version = {version + 1}")
    before = ledger.path.read_bytes()
    rc, out, err = run(["incidents", "--json"], capsys)
    assert rc == 2 and out == "" and "newer than this console's" in err and len(err.strip().splitlines()) == 1
    assert ledger.path.read_bytes() == before
