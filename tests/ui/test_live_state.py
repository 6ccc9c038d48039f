"""The real app, headless: what a pane says when its station is not live, a GPU in error, and
hostile log lines (1 MB, NUL, invalid UTF-8, markup, OSC) that must neither stall nor escape."""

from __future__ import annotations

import time

from textual.widgets import Input

from console.config import parse_config
from console.probes.nvidia_smi import GpuReading, error_reading
from console.station.log_buffer import DISPLAY_MAX_CHARS
from console.station.messages import ConnectionState, GpuSample, LogBatch, LogMarker
from console.ui import clock
from console.ui.app import ConsoleApp
from console.ui.widgets.log_view import row_spans
from tests.ui.pair_app import pane_text
from tests.waiting import until

CONFIG = """
profile = "glm53-nvfp4-2x-gb300-vllm"
[[stations]]
name = "A"
host = "station-a"
rank = 0
[[stations]]
name = "B"
host = "station-b"
rank = 1
"""


def gpus(used=236902):
    return [GpuReading(0, "GPU-0", "NVIDIA RTX PRO 6000 Blackwell Workstation Edition", 1184, 97887, 1, 31, 22.5),
            GpuReading(1, "GPU-1", "NVIDIA GB300", used, 256703, 0, 41, 165.4)]


async def test_stale_and_down_keep_the_last_values_with_their_age_and_the_next_try(monkeypatch):
    # The screens' "now" is pinned (console.ui.clock) and moved by the test: the ages asserted
    # never depend on how fast this machine draws (CI under load took over a second once).
    clock_now = [time.time()]
    monkeypatch.setattr(clock, "now", lambda: clock_now[0])
    app = ConsoleApp(parse_config(CONFIG, "x.toml"), start_services=False, clock=False)
    async with app.run_test(size=(200, 50)) as pilot:
        await pilot.pause()
        now = clock_now[0]
        app.post_message(ConnectionState("B", "live", last_sample_at=now))
        app.post_message(GpuSample("B", gpus(), now))
        b = app.panes["B"]
        await until(lambda: "● live" in pane_text(app, "B"), what="B live", pilot=pilot)
        assert not b.has_class("-stale")
        app.post_message(ConnectionState("B", "stale", "no sample for 4 s", last_sample_at=now - 4))
        await until(lambda: b.conn_state == "stale", what="B stale", pilot=pilot)
        text = pane_text(app, "B")
        assert "stale 4 s" in text and b.has_class("-stale")
        assert "231.3/250.7 GiB" in text  # the values stay on screen, dimmed
        seen = time.strftime("%H:%M:%S", time.localtime(now - 12))
        app.post_message(ConnectionState("B", "unreachable", "B: no sample for 12 s; connection declared dead",
                                         last_sample_at=now - 12, next_try_at=now + 1.4))
        await until(lambda: b.conn_state == "unreachable", what="B down", pilot=pilot)
        text = pane_text(app, "B")
        assert f"last seen {seen} (12 s ago)" in text and "next try in 1 s" in text
        assert "declared dead" in text and "231.3/250.7 GiB" in text and b.has_class("-stale")
        clock_now[0] += 1.0  # the age moves by itself (the app ticks the panes every second)
        await until(lambda: "(13 s ago)" in pane_text(app, "B"), what="the age to move", pilot=pilot)
        app.post_message(ConnectionState("B", "error", "RuntimeError: boom", last_sample_at=now - 12,
                                         next_try_at=clock_now[0] + 5))
        await until(lambda: "✖ error" in pane_text(app, "B"), what="B error", pilot=pilot)
        assert "RuntimeError: boom" in pane_text(app, "B")


async def test_a_gpu_that_fell_off_the_bus_is_a_row_in_error_next_to_the_good_one():
    app = ConsoleApp(parse_config(CONFIG, "x.toml"), start_services=False, clock=False)
    async with app.run_test(size=(200, 50)) as pilot:
        await pilot.pause()
        lost = error_reading(0, "Unable to determine the device handle for GPU00000000:01:00.0: Unknown Error")
        app.post_message(GpuSample("A", [lost, gpus()[1]], time.time()))
        await until(lambda: "GPU1 NVIDIA GB300" in pane_text(app, "A"), what="A's GPU rows", pilot=pilot)
        text = pane_text(app, "A")
        assert "GPU0 ✖ Unable to determine the device handle for GPU00000000:01:00.0" in text
        assert "GPU1 NVIDIA GB300" in text and "231.3/250.7 GiB" in text
        app.post_message(GpuSample("A", [], time.time(), error="nvidia-smi: NVIDIA-SMI has failed because it "
                                                               "couldn't communicate with the NVIDIA driver."))
        await until(lambda: "NVIDIA-SMI has failed" in pane_text(app, "A"),
                    what="the nvidia-smi error", pilot=pilot)
        text = pane_text(app, "A")
        assert "NVIDIA-SMI has failed" in text and "GPU1 NVIDIA GB300" in text  # last readings kept


HOSTILE = [
    "x" * 1_000_000,  # one 1 MB line (vLLM prints whole prompts and argument lists)
    "before\x00after",
    "bad utf-8: \ufffd\ufffd (decoded with errors=replace)",
    "[bold red]not markup[/] [link=http://evil]click[/link]",
    "osc: \x1b]52;c;ZXZpbA==\x07 clipboard write, csi: \x1b[2J cleared",
    "RuntimeError" + "E" * 200_000,  # long word: the old highlighter backtracked quadratically here
]


async def test_hostile_log_lines_keep_the_pane_streaming_and_the_ui_answering():
    app = ConsoleApp(parse_config(CONFIG, "x.toml"), start_services=False, clock=False)
    async with app.run_test(size=(200, 50)) as pilot:
        await pilot.pause()
        ticks = []
        app.set_interval(0.05, lambda: ticks.append(time.monotonic()))
        app.post_message(LogBatch("A", HOSTILE))
        await pilot.pause()
        # The app still answers keys and its timers keep ticking. No deadline in seconds (a loaded
        # machine is slow, not wrong): the quadratic highlighter this guards against took minutes.
        await pilot.press("slash")
        await until(lambda: isinstance(app.focused, Input), what="the UI to answer a key", timeout=20.0, pilot=pilot)
        n = len(ticks)
        await until(lambda: len(ticks) >= n + 3, what="the UI timer to tick", timeout=20.0, pilot=pilot)
        await pilot.press("escape")
        app.post_message(LogBatch("A", ["INFO:     Application startup complete.", LogMarker(
            "— A: stream interrupted 07:17:09–07:17:41 —")]))
        pane = app.panes["A"].log_pane
        await until(lambda: len(pane.log_widget.lines) == len(HOSTILE) + 2,
                    what="the last two lines", pilot=pilot)
        shown = list(pane.log_widget.lines)
        assert shown[-2] == "INFO:     Application startup complete."  # still streaming
        big = shown[0]
        assert len(big) < DISPLAY_MAX_CHARS + 40 and big.endswith("… [+995,904 chars]")
        assert shown[1] == "before␀after"
        assert "[bold red]not markup[/]" in shown[3]  # shown as text, never interpreted
        assert "\x1b" not in shown[4] and "clipboard write" in shown[4] and "]52;" not in shown[4]
        assert all("\x1b" not in ln and "\x00" not in ln for ln in shown)


def test_highlighting_a_long_line_is_linear():
    """The error pattern anchors at word starts: a 200 KB word is one scan, not 200 K of them."""
    for text in ("RuntimeError" + "E" * 200_000, "a" * 200_000, "x " * 100_000):
        start = time.perf_counter()
        row_spans(text)
        assert time.perf_counter() - start < 10.0  # a guard, not a target: quadratic took minutes here


async def test_changed_host_key_is_red_with_both_keys_and_replaced_only_by_typing_its_fingerprint(sim_factory,
                                                                                                  tmp_path):
    import dataclasses

    import asyncssh
    from textual.widgets import Button

    h = await sim_factory(running=False)
    old = asyncssh.generate_private_key("ssh-ed25519")
    kh = tmp_path / "kh"
    port = h.server.endpoints["A"].port
    kh.write_text(f"[127.0.0.1]:{port} {old.export_public_key().decode()}")
    a = dataclasses.replace(h.config.station("A"), known_hosts=str(kh))
    cfg = dataclasses.replace(h.config, stations=(a, h.config.station("B")))
    real = asyncssh.read_private_key(str(h.world.root / "keys" / "host_A_ed25519")).get_fingerprint("sha256")
    app = ConsoleApp(cfg, gpu_interval_ms=200)
    async with app.run_test(size=(200, 50)) as pilot:
        await until(lambda: app.panes["A"].conn_state == "host-key-changed",
                    what="A's changed host key", pilot=pilot)
        text = " ".join(pane_text(app, "A").split())  # a fingerprint may wrap at the pane's edge
        assert "HOST KEY CHANGED" in text and f"ED25519 {old.get_fingerprint('sha256')}" in text
        assert f"offered ED25519 {real}" in text
        await pilot.press("T")
        await until(lambda: app.screen.__class__.__name__ == "ReplaceHostKeyScreen", what="the replace dialog",
                    pilot=pilot)
        yes = app.screen.query_one("#yes", Button)
        assert yes.disabled
        app.screen.query_one(Input).value = "SHA256:wrong"
        await pilot.pause()  # the dialog has handled the change
        assert yes.disabled  # a click is never enough: the new fingerprint must be typed
        app.screen.query_one(Input).value = real
        await until(lambda: not yes.disabled, what="Yes enabled by the typed fingerprint", pilot=pilot)
        await pilot.click("#yes")
        await until(lambda: app.panes["A"].conn_state == "live", what="A live with the new key", timeout=60,
                    pilot=pilot)
        assert old.export_public_key().decode().split()[1] not in kh.read_text()
        assert kh.read_text().count("ssh-ed25519") == 1


async def test_a_check_badge_says_when_it_ran_and_turns_stale_when_the_link_changes():
    """Before, "checks: 9 FAIL" outlived the fix (still there 20 s after the link came back). The
    badge says when the checks ran; a change of the station's connection afterwards dims it and says so."""
    from console.station.checks import CheckResult
    from console.ui.screens.checks import ChecksDone

    app = ConsoleApp(parse_config(CONFIG, "x.toml"), start_services=False, clock=False)
    async with app.run_test(size=(200, 50)) as pilot:
        await pilot.pause()
        now = time.time()
        app.post_message(ConnectionState("B", "unreachable", "B: no answer", last_sample_at=now - 5))
        ran = now - 65
        results = [CheckResult("link-down", "B", "fail", "no carrier"), CheckResult("mtu-value", "A", "pass", "9000")]
        app.post_message(ChecksDone(results, at=ran))
        when = time.strftime("%H:%M:%S", time.localtime(ran))
        await until(lambda: f"checks {when}: 1 FAIL" in pane_text(app, "B"), what="the badge with its time",
                    pilot=pilot, detail=lambda: pane_text(app, "B"))
        assert "stale" not in app.panes["B"].badges["checks"].plain and not app.panes["B"].badges["checks"].style
        app.post_message(ConnectionState("B", "live", last_sample_at=time.time()))  # the link came back
        await until(lambda: "(before unreachable → live at" in pane_text(app, "B"), what="the badge turned stale",
                    pilot=pilot, detail=lambda: pane_text(app, "B"))
        badge = app.panes["B"].badges["checks"]
        assert badge.style == "dim" and f"checks {when} (before unreachable → live" in badge.plain
        assert "1 FAIL" in badge.plain and "a to rerun" in badge.plain
        assert app.panes["A"].badges["checks"].plain == f"checks {when}: 1 pass"  # A's link did not change
        app.post_message(ChecksDone(results[1:], at=time.time()))  # a new pass: fresh again
        await until(lambda: app.panes["B"].badges.get("checks") is not None
                    and "before" not in app.panes["B"].badges["checks"].plain, what="a fresh badge", pilot=pilot)
