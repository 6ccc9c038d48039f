"""An incident replayed on screen from the ledger (``I``, then ``p``): the REPLAY strip says it is a
replay, of which incident, when it began and which moment is shown; the keys step, scrub, jump, play
and leave; the verdicts are the judge's on the window as it was (a wedge reads wedged again once the
counter has been frozen for the window). The bundle is a real one: the incident window fed samples,
written by the capture's own archive code; a bundle that is not one says so on the strip."""

from __future__ import annotations

import time

from pair_app import pair_app
from textual.widgets import DataTable, Static

from console.commands.bundle import write_archive
from console.incidents.capture import build_members
from console.incidents.store import Ledger
from console.incidents.window import Window
from console.ui.screens.incidents import IncidentsScreen
from console.ui.screens.replay import ReplayScreen, utc
from tests.waiting import until

BEFORE, FROZEN = 60, 90  # seconds of tokens moving, then frozen with 4 requests running


def wedge_window(t0: float) -> Window:
    w = Window()
    for name in ("A", "B"):
        w.add(name, t0, "container", {"state": "running", "started_at": "2026-12-06T00:00:00Z", "exit_code": None})
        w.add(name, t0, "engine", {"phase": "ready"})
    tok = 0
    for k in range(0, BEFORE + FROZEN, 2):
        t = t0 + 1 + k
        tok += 100 if k < BEFORE else 0
        for name in ("A", "B"):
            w.add(name, t, "gpu", {"gpus": [{"i": 0, "util": 100, "mem_mib": 1000, "mem_total_mib": 2000,
                                             "power_w": 250.0, "temp_c": 60}], "error": None})
        w.add("A", t, "serving", {"running": 4, "waiting": 0, "gen_tokens": tok, "gen_tok_s": 50.0 if k < BEFORE else 0.0,
                                  "kv": 0.1, "health": "ok", "error": None})
    return w


def kept_incident(kind: str = "wedge") -> tuple[Ledger, int, float]:
    """A wedge incident in the ledger with its bundle (the window and the row, as the recorder writes them)."""
    t0 = time.time() - 3600
    start = t0 + BEFORE + 1
    led = Ledger()
    claim = led.open_incident("svc", kind, start, ["A"], "A: wedged", "restart")
    path = led.bundles / f"incident-{claim.id}-wedge.tar.gz"
    row = {"id": claim.id, "kind": kind, "start": start, "stations": ["A"], "verdict": "A: wedged"}
    members = build_members(None, row, wedge_window(t0).lines(0), lambda s: s)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_archive(path, members)
    led.update(claim.id, bundle=str(path), bundle_bytes=path.stat().st_size)
    led.add_action(claim.id, "captured")
    led.close_incident(claim.id, start + FROZEN)
    return led, claim.id, start


def strip(screen) -> str:
    return str(screen.query_one("#replay-strip", Static).content)


def progress_of(screen, station: str) -> str:
    table = screen.query_one(DataTable)
    for key in table.rows:
        row = table.get_row(key)
        if str(row[0]) == station:
            return str(row[1])
    raise AssertionError(f"no row for {station}")


async def test_an_incident_is_replayed_from_the_ledger_and_left(tmp_path):
    _led, iid, start = kept_incident()
    app = pair_app(tmp_path)
    async with app.run_test(size=(180, 45)) as pilot:
        await pilot.press("I")
        listing = await until(lambda: isinstance(app.screen, IncidentsScreen) and app.screen, what="the ledger",
                              pilot=pilot, timeout=10)
        await until(lambda: listing.query_one(DataTable).row_count == 1, what="the row", pilot=pilot, timeout=10)
        await pilot.press("p")
        screen = await until(lambda: isinstance(app.screen, ReplayScreen) and app.screen, what="the replay",
                             pilot=pilot, timeout=10)
        await until(lambda: screen.frames, what="the frames", pilot=pilot, timeout=30)
        await pilot.pause()
        text = strip(screen)
        assert text.startswith("REPLAY, NOT LIVE · ") and f"incident {iid} (wedge) began {utc(start)}" in text, text
        assert "(+0:00 from the incident's start)" in text and "paused" in text
        assert "Esc leave" in text and "space play/pause" in text
        at = screen.index
        await pilot.press("right")
        assert screen.index == at + 1 and "(+0:01 from the incident's start)" in strip(screen)
        await pilot.press("left", "left")
        assert "(-0:01 from the incident's start)" in strip(screen)
        assert progress_of(screen, "A") == "progressing"  # the tokens still moved a second before the freeze
        await pilot.press("right", "shift+right")
        assert "(+0:30 from the incident's start)" in strip(screen)
        await pilot.press("shift+right")
        assert progress_of(screen, "A") == "wedged", strip(screen)  # frozen for over the 30-s window
        why = str(screen.query_one("#replay-why", Static).content)
        assert why.startswith("A: wedged: ")
        serving = str(screen.query_one("#replay-serving", Static).content)
        assert "running 4" in serving and "0.0 tok/s" in serving
        await pilot.press("home")
        assert screen.index == 0 and "(-1:01 from the incident's start)" in strip(screen)
        await pilot.press("i")
        assert screen.index == at
        await pilot.press("plus", "plus", "space")  # 5 frames a second
        assert "playing 5×" in strip(screen)
        await until(lambda: screen.index >= at + 3, what="playing on", pilot=pilot, timeout=10)
        await pilot.press("space")
        stopped = screen.index
        assert "paused (speed 5×)" in strip(screen)
        await pilot.pause(0.5)
        assert screen.index == stopped
        await pilot.press("escape")
        assert app.screen is listing


async def test_no_bundle_is_said_and_a_hostile_bundle_is_not_replayed(tmp_path):
    led = Ledger()
    bare = led.open_incident("svc", "stuck", time.time() - 60, ["A"], "stuck", "restart")
    led.add_action(bare.id, "skipped")
    bad = tmp_path / "not-a-bundle.tar.gz"
    bad.write_bytes(b"[red]not a tar[/red]\x1b[2J")
    app = pair_app(tmp_path)
    said: list[str] = []
    real = app.notify

    def notify(message, *a, **kw):
        said.append(str(message))
        return real(message, *a, **kw)

    app.notify = notify  # type: ignore[method-assign]
    async with app.run_test(size=(180, 45)) as pilot:
        await pilot.press("I")
        listing = await until(lambda: isinstance(app.screen, IncidentsScreen) and app.screen, what="the ledger",
                              pilot=pilot, timeout=10)
        await until(lambda: listing.chosen is not None, what="the row", pilot=pilot, timeout=10)
        await pilot.press("p")
        await pilot.pause()
        assert app.screen is listing and any(f"incident {bare.id} has no bundle to replay" in s for s in said), said
        app.push_screen(ReplayScreen(str(bad), 30.0, 7))
        screen = await until(lambda: isinstance(app.screen, ReplayScreen) and app.screen.error and app.screen,
                             what="the refusal", pilot=pilot, timeout=10)
        text = strip(screen)
        assert text.startswith("REPLAY · incident 7 (?) · not replayed: ") and "not an incident bundle" in text
        assert "\x1b" not in text
        await pilot.press("right", "space")  # nothing to step or play: no error
        await pilot.press("escape")
        assert app.screen is listing


async def test_replay_bundle_on_screen_alone_and_its_cli_without_a_terminal(capsys):
    from console.cli import main
    from console.ui.screens.replay import ReplayApp

    led, iid, start = kept_incident()
    bundle = led.get(iid).bundle
    app = ReplayApp(bundle, 30.0)
    async with app.run_test(size=(180, 45)) as pilot:
        screen = await until(lambda: isinstance(app.screen, ReplayScreen) and app.screen.frames and app.screen,
                             what="the frames", pilot=pilot, timeout=30)
        await pilot.pause()
        assert f"incident {iid} (wedge) began {utc(start)}" in strip(screen)
        await pilot.press("escape")
        await until(lambda: not app.is_running, what="the app ended", pilot=pilot, timeout=10)
    assert main(["replay", bundle]) == 2  # pytest's stdin is no terminal: one line, exit 2
    assert "needs a terminal" in capsys.readouterr().err
    assert main(["replay", bundle + ".missing"]) == 2
