"""The benchmark against the simulated API (known token rate, vLLM ``/metrics`` counters), in
process and as the ``dgx-console bench`` process."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest
from aiohttp import web

from console.serving.bench import BenchRunner
from console.serving.bench_model import BenchProgress, BenchSettings
from console.serving.chat import ChatRequest
from console.serving.client import ApiClient
from console.serving.metrics import parse_metrics
from console.sim.api import FixedBackend, create_app
from tests.waiting import until


@dataclass
class Backend(FixedBackend):
    """What ``create_app`` needs: a station whose engine is ready, at a known per-user rate."""
    tokens_per_s: float = 400.0


@pytest.fixture
async def api() -> AsyncIterator:
    runners: list[web.AppRunner] = []
    clients: list[ApiClient] = []

    async def start(**kw) -> ApiClient:
        runner = web.AppRunner(create_app(Backend(**kw)))
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        runners.append(runner)
        port = runner.addresses[0][1]
        client = ApiClient(f"http://127.0.0.1:{port}", api_key=kw.get("api_key"), timeout=5, stream_timeout=30)
        clients.append(client)
        return client

    yield start
    for c in clients:
        await c.aclose()
    for r in runners:
        await r.cleanup()


async def test_sweep_counts_what_the_server_counts(api):
    client = await api(tokens_per_s=400.0)
    seen: list[BenchProgress] = []
    settings = BenchSettings((1, 3), requests_per_level=4, warmup=1, max_tokens=24, ignore_eos=True)
    report = await BenchRunner(client, "glm-5.3", settings, on_progress=seen.append).run()
    assert [lv.concurrency for lv in report.levels] == [1, 3]
    for lv in report.levels:
        assert lv.errors == 0 and lv.requests == 4
        assert lv.output_tokens == 4 * 24  # ignore_eos: exactly max_tokens each
        assert lv.server_tokens == lv.output_tokens and not lv.mismatch
        assert lv.total_tok_s and lv.per_user_tok_s and lv.ttft_ms_mean and lv.itl_ms_mean
    # the simulated engine paces 400 tok/s per user at C1 (a loose bound: a loaded CI box only slows it)
    c1 = report.levels[0]
    assert 200 < c1.per_user_tok_s < 520
    assert c1.itl_ms_mean == pytest.approx(1000 / c1.per_user_tok_s, rel=0.2)
    # progress: warm-up then measured requests, then the verified result, per level
    phases = [(p.concurrency, p.phase) for p in seen]
    assert phases.index((1, "warmup")) < phases.index((1, "measure")) < phases.index((1, "done"))
    assert [p.done for p in seen if p.concurrency == 3 and p.phase == "measure"][-1] == 4
    assert seen[-1].result is report.levels[-1]
    assert not report.failed


async def test_the_servers_queue_is_reported(api):
    client = await api(tokens_per_s=400.0, max_num_seqs=2)  # the engine runs 2 at once, we send 4
    settings = BenchSettings((4,), requests_per_level=4, warmup=0, max_tokens=200, ignore_eos=True, watch_s=0.1)
    report = await BenchRunner(client, "glm-5.3", settings).run()
    lv = report.levels[0]
    assert lv.server_running_max == 2 and lv.server_waiting_max == 2
    assert lv.server_tokens == lv.output_tokens == 800
    assert any("ran at most 2 requests at once and queued up to 2" in w for w in report.warnings)


async def test_reasoning_is_counted_and_effort_changes_the_length(api):
    client = await api(tokens_per_s=2000.0)
    low = await BenchRunner(client, "glm-5.3", BenchSettings((1,), 2, 0, 2000, effort="low")).run()
    high = await BenchRunner(client, "glm-5.3", BenchSettings((1,), 2, 0, 2000, effort="high")).run()
    assert low.levels[0].server_tokens == low.levels[0].output_tokens
    assert high.levels[0].output_tokens > low.levels[0].output_tokens  # reasoning is in OSL


async def test_other_traffic_during_the_measurement_is_a_mismatch(api):
    client = await api(tokens_per_s=200.0)
    other: list[asyncio.Task] = []

    def on_progress(p: BenchProgress) -> None:
        if p.phase == "measure" and p.done == 0 and not other:  # someone else chats meanwhile
            req = ChatRequest(({"role": "user", "content": "hello"},), "glm-5.3", max_tokens=300,
                              extra={"ignore_eos": True})
            other.append(asyncio.ensure_future(client.chat(req)))

    settings = BenchSettings((1,), requests_per_level=2, warmup=0, max_tokens=40, ignore_eos=True, settle_s=0.5)
    report = await BenchRunner(client, "glm-5.3", settings, on_progress=on_progress).run()
    lv = report.levels[0]
    assert lv.output_tokens == 80
    assert lv.server_tokens is not None and lv.server_tokens > 80 and lv.mismatch
    assert report.failed
    other[0].cancel()
    await asyncio.gather(*other, return_exceptions=True)


async def test_cancel_closes_the_streams_and_keeps_finished_levels(api):
    client = await api(tokens_per_s=1000.0, max_num_seqs=4)
    in_c4 = asyncio.Event()
    settings = BenchSettings((1, 4), requests_per_level=4, warmup=0, max_tokens=400, ignore_eos=True)
    runner = BenchRunner(client, "glm-5.3", settings,
                         on_progress=lambda p: in_c4.set() if (p.concurrency, p.phase) == (4, "measure") else None)
    task = asyncio.create_task(runner.run())
    await asyncio.wait_for(in_c4.wait(), 30)

    async def running_is(n: int) -> bool:
        return parse_metrics(await client.metrics_text()).gauges["running"] == n

    await until(lambda: running_is(4), what="four streams open and generating", timeout=10)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert runner.report.cancelled
    assert [lv.concurrency for lv in runner.report.levels] == [1]  # C1 finished and stays
    assert runner.report.levels[0].output_tokens == 1600
    await until(lambda: running_is(0), what="the server to see the streams close and free its slots", timeout=5)


async def healthy(client: ApiClient) -> bool:
    return (await client.health()).ok


def _cli(*argv: str, env: dict | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "console", *argv], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **(env or {})})


async def test_cli_json_against_the_simulated_pair(sim_factory):
    h = await sim_factory(running=True, time_scale=0.005)
    client = ApiClient(h.config.api_url(), timeout=2)
    try:
        await until(lambda: healthy(client), what="the simulated API healthy", timeout=20)
    finally:
        await client.aclose()
    proc = await asyncio.to_thread(_cli, "bench", "--config", str(h.config_path), "--concurrency", "1,17",
                                   "--requests-per-level", "2", "--warmup", "0", "--max-tokens", "6",
                                   "--ignore-eos", "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert [lv["concurrency"] for lv in data["levels"]] == [1, 17]
    for lv in data["levels"]:
        assert set(lv) >= {"concurrency", "requests", "output_tokens", "total_tok_s", "per_user_tok_s",
                           "ttft_ms_mean", "itl_ms_mean", "latency_s_mean", "errors"}
        assert lv["output_tokens"] == 12 and lv["server_tokens"] == 12 and lv["errors"] == 0
    # the profile launches with --max-num-seqs 16, below C17
    assert "--max-num-seqs 16" in proc.stderr and "C17" in proc.stderr
    assert data["warnings"] and "C17" in data["warnings"][0]


async def test_cli_unauthorized_is_exit_1_one_line(api):
    client = await api(api_key="right-key")
    proc = await asyncio.to_thread(_cli, "bench", "--url", client.base_url, "--api-key", "wrong-key",
                                   "--concurrency", "1", "--requests-per-level", "1", "--warmup", "0")
    assert proc.returncode == 1
    assert "401" in proc.stderr and "Traceback" not in proc.stderr
    assert "wrong-key" not in proc.stderr + proc.stdout


async def test_cli_errors_in_requests_exit_1_and_saved_files(api, tmp_path):
    client = await api(max_model_len=64)  # every request asks for more than fits: HTTP 400
    out = tmp_path / "res"
    proc = await asyncio.to_thread(_cli, "bench", "--url", client.base_url, "--model", "glm-5.3",
                                   "--concurrency", "2", "--requests-per-level", "2", "--warmup", "0",
                                   "--max-tokens", "500", "--out", str(out))
    assert proc.returncode == 1, proc.stderr
    assert "HTTP 400" in proc.stdout
    data = json.loads((tmp_path / "res.json").read_text())
    assert data["levels"][0]["errors"] == 2
    assert (tmp_path / "res.csv").read_text().splitlines()[1].startswith("2,2,0,")
