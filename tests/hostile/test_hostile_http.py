"""Hostile input, round two: every request bounded in bytes (counted
decoded) and in time (one deadline for connect + headers + body), a cut reply is an error, the
server's numbers are checked, and ``status`` reads the API through the same client as the rest.

Each test names the attack; each failed before its fix (a traceback, a hang, GBs of memory, exit 0
on a truncated reply, a raw -5 on the panel)."""

from __future__ import annotations

import io
import time
import tracemalloc

import pytest
from hostile_api import HostileServer
from test_hostile_cli import assert_clean, run_cli
from test_hostile_tui import _reply, assert_screen_clean
from textual.app import App

import console.serving.client as client_mod
from console.serving.client import ApiClient
from console.serving.metrics import INVALID, ServingMonitor, ServingSnapshot, is_invalid, parse_metrics
from console.serving.probe import api_status
from console.ui.screens.chat import ChatScreen
from console.ui.widgets.serving_panel import render_snapshot

CONFIG = """\
[[stations]]
name = "A"
host = "127.0.0.1"
port = 1
rank = 0

[api]
url = "{url}"
timeout_s = {timeout}
"""


def status_config(tmp_path, url: str, timeout: float = 2.0) -> str:
    p = tmp_path / "dgx-console.toml"
    p.write_text(CONFIG.format(url=url, timeout=timeout))
    return str(p)


# ---------------------------------------------------------------- status through the one client


@pytest.mark.parametrize("mode, words", [
    ("html", "not JSON: an HTML page"),
    ("list", "lists no model"),
    ("data-int", "lists no model"),
    ("bad-utf8", "not JSON: not UTF-8"),
])
async def test_status_model_list_hostile_shapes_are_states(hostile: HostileServer, tmp_path, capsys, mode, words):
    hostile.models_mode = mode
    res = await api_status(hostile.url, None, 5.0)
    assert res["healthy"] is True and res["model"] is None and words in res["error"]
    rc, out, err = await run_cli(capsys, "status", "--config", status_config(tmp_path, hostile.url))
    assert rc == 1  # the station (port 1) is unreachable; the API line is words, not a traceback
    assert_clean(out, err)
    api_line = next(ln for ln in out.splitlines() if ln.strip().startswith("API "))
    assert "healthy;" in api_line and words in api_line


async def test_status_302_on_health_is_not_healthy(hostile: HostileServer, tmp_path, capsys):
    hostile.health_mode = "302"
    res = await api_status(hostile.url, None, 5.0)
    assert res["healthy"] is False and "302" in res["error"] and "redirect" in res["error"]
    rc, out, err = await run_cli(capsys, "status", "--config", status_config(tmp_path, hostile.url))
    assert_clean(out, err)
    assert "not healthy (HTTP 302" in out


async def test_status_gzip_bomb_model_list_is_refused_with_bounded_memory(hostile: HostileServer):
    hostile.models_mode, hostile.bomb_mb = "gzip-bomb", 96  # ~100 KB on the wire, 96 MB decoded
    tracemalloc.start()
    try:
        res = await api_status(hostile.url, None, 10.0)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert "larger than 4 MB" in res["error"] and res["model"] is None
    assert peak < 24 * 1024 * 1024, f"peak {peak / 1e6:.0f} MB for a 4 MB cap"


@pytest.mark.parametrize("where", ["headers", "model list body"])
async def test_status_drip_ends_at_the_timeout(hostile: HostileServer, tmp_path, capsys, where):
    url = hostile.raw_url if where == "headers" else hostile.url
    hostile.models_mode = "drip"
    t0 = time.monotonic()
    rc, out, err = await run_cli(capsys, "status", "--config", status_config(tmp_path, url, timeout=1.0))
    assert time.monotonic() - t0 < 20
    assert_clean(out, err)
    assert "no complete answer within 1s" in out


# ---------------------------------------------------------------- caps count decoded bytes


async def test_chat_gzip_bomb_stream_is_cut_at_the_decoded_cap(hostile: HostileServer, capsys, monkeypatch):
    hostile.mode, hostile.bomb_mb = "gzip-bomb", 96
    monkeypatch.setattr(client_mod, "MAX_STREAM_BYTES", 4 * 1024 * 1024)
    tracemalloc.start()
    try:
        rc, out, err = await run_cli(capsys, "chat", "--url", hostile.url, "--model", "m", "-m", "hi")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert rc == 1 and "larger than 4 MB" in err, err[-300:]
    assert peak < 48 * 1024 * 1024, f"peak {peak / 1e6:.0f} MB for a 4 MB cap"


async def test_chat_gzip_bomb_model_list_is_refused(hostile: HostileServer, capsys):
    hostile.models_mode, hostile.bomb_mb = "gzip-bomb", 96
    rc, out, err = await run_cli(capsys, "chat", "--url", hostile.url, "-m", "hi")
    assert rc == 1 and "GET /v1/models: the response is larger than 4 MB" in err


async def test_metrics_gzip_bomb_is_refused_with_bounded_memory(hostile: HostileServer):
    hostile.metrics_mode, hostile.bomb_mb = "gzip-bomb", 96
    async with ApiClient(hostile.url, timeout=10) as client:
        mon = ServingMonitor(client, lambda s: None)
        tracemalloc.start()
        try:
            snap = await mon.poll_once()
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert snap.error == "metrics too large (over 8 MB): not read"
    assert peak < 40 * 1024 * 1024, f"peak {peak / 1e6:.0f} MB"


async def test_a_small_gzip_body_is_still_read(hostile: HostileServer):
    """A server that compresses although identity was asked (a proxy): decoded and used, not refused."""
    hostile.mode, hostile.bomb_mb = "gzip-bomb", 1
    async with ApiClient(hostile.url, timeout=10) as client:
        from console.serving.chat import ChatRequest

        res = await client.chat(ChatRequest(messages=({"role": "user", "content": "hi"},), model="m"))
    assert res.error is None and len(res.content) > 100_000


# ---------------------------------------------------------------- one deadline per request


async def test_chat_dripped_headers_end_at_the_timeout(hostile: HostileServer, capsys):
    t0 = time.monotonic()
    rc, out, err = await run_cli(capsys, "chat", "--url", hostile.raw_url, "--model", "m", "-m", "hi",
                                 "--timeout", "1", "--max-time", "2")
    assert time.monotonic() - t0 < 10
    assert rc == 1 and "no complete response headers within 1s" in err


async def test_chat_dripped_model_list_ends_at_the_timeout(hostile: HostileServer, capsys):
    hostile.models_mode = "drip"
    t0 = time.monotonic()
    rc, out, err = await run_cli(capsys, "chat", "--url", hostile.url, "-m", "hi", "--timeout", "1")
    assert time.monotonic() - t0 < 10
    assert rc == 1 and "GET /v1/models: timed out: no complete answer within 1s" in err


async def test_bench_dripped_metrics_end_at_the_timeout(hostile: HostileServer, capsys):
    hostile.metrics_mode = "drip"
    t0 = time.monotonic()
    rc, out, err = await run_cli(capsys, "bench", "--url", hostile.url, "--model", "m", "--concurrency", "1",
                                 "--requests-per-level", "1", "--warmup", "0", "--timeout", "1")
    assert time.monotonic() - t0 < 20
    assert_clean(out, err)
    assert "conc" in out  # the sweep ran; the server's counter is "n/a", not a hang, and says why
    assert "token counter could not be read (GET /metrics: timed out: no complete answer within 1s" in err


async def test_serving_poll_of_a_dripping_server_ends_and_the_panel_says_late(hostile: HostileServer):
    async with ApiClient(hostile.raw_url, timeout=1) as client:
        mon = ServingMonitor(client, lambda s: None)
        t0 = time.monotonic()
        snap = await mon.poll_once()
        assert time.monotonic() - t0 < 5
    assert snap.status == "unreachable" and "no complete answer within 1s" in (snap.error or "")
    now = time.time()
    healthy = ServingSnapshot(url="u", healthy=True, status="ok", running=1, updated_at=now - 57, polled_at=now - 57)
    text = _rendered(healthy, now)
    assert "● healthy" not in text and "no answer for 57 s (last: healthy)" in text


def _rendered(snap: ServingSnapshot, now: float) -> str:
    from rich.console import Console

    console = Console(width=120, record=True, color_system=None, file=io.StringIO())
    console.print(render_snapshot(snap, now))
    return console.export_text()


# ---------------------------------------------------------------- a cut reply is an error


@pytest.mark.parametrize("mode, words", [("cut", "the reply was cut: the stream ended after 3 chunk(s)"),
                                         ("empty", "the reply was cut: an empty stream"),
                                         ("done-only", "[DONE] without any reply")])
async def test_chat_cut_reply_exits_1_in_words(hostile: HostileServer, capsys, mode, words):
    hostile.mode = mode
    rc, out, err = await run_cli(capsys, "chat", "--url", hostile.url, "--model", "m", "-m", "hi")
    assert rc == 1 and words in err, err
    assert_clean(out, err)
    rc, out, _ = await run_cli(capsys, "chat", "--url", hostile.url, "--model", "m", "-m", "hi", "--json")
    assert rc == 1 and '"kind": "cut"' in out


async def test_bench_counts_a_cut_reply_as_an_error(hostile: HostileServer, capsys):
    hostile.mode = "cut"
    rc, out, err = await run_cli(capsys, "bench", "--url", hostile.url, "--model", "m", "--concurrency", "1",
                                 "--requests-per-level", "2", "--warmup", "0", "--timeout", "5")
    assert rc == 1
    assert "error: cut:" in out and "the reply was cut" in out


# ---------------------------------------------------------------- the server's numbers checked


def test_out_of_range_metrics_are_invalid_and_the_rest_kept():
    from hostile_api import METRICS_HOSTILE_VALUES

    s = parse_metrics(METRICS_HOSTILE_VALUES, t=1.0)
    assert {"running", "waiting", "kv_usage", "cache_hit_rate", "ttft"} <= s.invalid
    assert s.counters["generation_tokens"] == 1000  # the good series stay
    assert s.gauges["spec_accept_rate"] == 0.5  # after a line that is not Prometheus at all
    assert s.histograms["itl"] == ((0.01, 4.0), (0.05, 10.0), (float("inf"), 10.0))  # le="zzz" skipped alone


async def test_serving_panel_shows_invalid_never_raw(hostile: HostileServer):
    hostile.metrics_mode = "hostile-values"
    async with ApiClient(hostile.url, timeout=5) as client:
        mon = ServingMonitor(client, lambda s: None, clock=iter(range(0, 1000, 2)).__next__)
        await mon.poll_once()
        snap = await mon.poll_once()
    assert snap.error is None
    for v in (snap.running, snap.waiting, snap.kv_usage, snap.ttft_p50_s, snap.prefix_hit_rate):
        assert is_invalid(v)
    assert not is_invalid(snap.itl_p50_s) and snap.spec_accept_rate == 0.5  # the good series stay
    text = " ".join(_rendered(snap, time.time()).split())
    assert "Reqs invalid run · invalid wait" in text and "KV invalid" in text and "TTFT invalid" in text
    for raw in ("-5", "-350", "1000000000", "inf", "-2,000"):
        assert raw not in text
    assert "out of range from the server: prefix hits, KV, running, TTFT, waiting (shown as invalid)" in text


async def test_302_on_health_is_not_healthy_on_the_panel(hostile: HostileServer):
    hostile.health_mode = "302"
    async with ApiClient(hostile.url, timeout=5) as client:
        snap = await ServingMonitor(client, lambda s: None).poll_once()
    assert snap.healthy is False and snap.status == "unhealthy" and snap.http_status == 302
    assert "● unhealthy (302 redirect)" in _rendered(snap, time.time())


def test_invalid_is_nan_and_not_unknown():
    assert is_invalid(INVALID) and not is_invalid(None) and not is_invalid(0.0)


# ---------------------------------------------------------------- a large /metrics costs little


async def test_a_large_metrics_body_is_read_less_often(hostile: HostileServer):
    hostile.metrics_mb = 7.8
    async with ApiClient(hostile.url, timeout=10) as client:
        mon = ServingMonitor(client, lambda s: None, interval_s=0.01)
        snap = await mon.poll_once()
        assert snap.error is None and snap.metrics_size > 7 * 1024 * 1024
        assert snap.metrics_every_s is not None and snap.metrics_every_s >= 0.01
        sent = hostile.metrics_sent
        hostile.metrics_sent = 0
        again = await mon.poll_once()
    if snap.metrics_every_s > 0.5:  # the next round came sooner than the period: /metrics was not read
        assert hostile.metrics_sent == 0 and again.updated_at == snap.updated_at
    assert sent > 7 * 1024 * 1024
    assert "/metrics is 7.8 MB: read every" in " ".join(_rendered(snap, time.time()).split())


# ---------------------------------------------------------------- the TUI chat: bounded, and a cut reply said


class _ChatApp(App):
    def __init__(self, url: str, **kw) -> None:
        super().__init__()
        self.url, self.kw = url, kw

    def on_mount(self) -> None:
        self.push_screen(ChatScreen(self.url, **self.kw))


async def test_tui_chat_dripped_headers_end_in_words(hostile: HostileServer):
    app = _ChatApp(hostile.raw_url, model="m", stream_timeout=1.0, total_timeout=2.0)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = app.screen
        t0 = time.monotonic()
        await _reply(pilot, screen, "hi")
        assert time.monotonic() - t0 < 10
        result = screen.replies[-1].result
        assert result.error is not None and result.error.kind == "timeout"
        await pilot.pause()
        assert "no complete response headers within 1s" in assert_screen_clean(app)


async def test_tui_chat_says_a_cut_reply_and_keeps_it_out_of_the_history(hostile: HostileServer):
    hostile.mode = "cut"
    app = _ChatApp(hostile.url, model="m")
    async with app.run_test(size=(120, 40)) as pilot:
        screen = app.screen
        await _reply(pilot, screen, "hi")
        result = screen.replies[-1].result
        assert result.error is not None and result.error.kind == "cut"
        assert result.content == "The answer is forty"  # what came stays on screen
        await pilot.pause()
        out = assert_screen_clean(app)
        assert "reply cut short" in out
        assert screen.history == []  # a truncated answer is not sent back as the assistant's turn
