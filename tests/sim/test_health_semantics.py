"""The serving API's health probing, through the real client and monitor over loopback HTTP: refused = down,
timeout = hung or saturated, 5xx = error, red only after 3 misses in a row; SGLang's
``/health_generate`` where it exists (a wedged engine never answers it, and /metrics is still read)."""

from __future__ import annotations

from dataclasses import dataclass

from aiohttp import web

from console.serving.client import ApiClient
from console.serving.metrics import MISSES_FOR_RED, ServingMonitor
from console.sim.api import FixedBackend, create_app


@dataclass
class SglangBackend(FixedBackend):
    engine: str = "sglang"
    tokens_per_s: float = 100.0
    wedged: bool = False

    def load(self) -> tuple[int, float, bool]:
        return 4, 500.0, self.wedged


async def _serve(app: web.Application) -> tuple[web.AppRunner, str]:
    runner = web.AppRunner(app, shutdown_timeout=0.5)  # (a wedged request does not end by itself)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    return runner, f"http://127.0.0.1:{runner.addresses[0][1]}"


async def test_sglang_is_asked_health_generate_and_a_wedge_times_it_out_while_metrics_still_tell():
    b = SglangBackend()
    runner, url = await _serve(create_app(b))
    try:
        async with ApiClient(url, timeout=1) as c:
            mon = ServingMonitor(c, lambda s: None)
            first = await mon.poll_once()
            assert first.status == "ok" and first.engine == "sglang" and first.health_path == "/health"
            second = await mon.poll_once()
            assert second.status == "ok" and second.health_path == "/health_generate"
            b.wedged = True
            looks = [await mon.poll_once() for _ in range(MISSES_FOR_RED)]
    finally:
        await runner.cleanup()
    assert [s.status for s in looks] == ["missed", "missed", "unreachable"]
    assert [s.misses for s in looks] == [1, 2, 3] and looks[0].miss == "timeout: hung or saturated"
    assert all(s.gen_tokens_total == 500.0 and s.running == 4 and s.error is None for s in looks)


async def test_an_sglang_without_health_generate_falls_back_to_health():
    async def ok(request: web.Request) -> web.Response:
        return web.Response(status=200)

    async def metrics(request: web.Request) -> web.Response:
        return web.Response(text='sglang:num_running_reqs{model_name="m"} 0\n'
                                 'sglang:generation_tokens_total{model_name="m"} 7\n')

    app = web.Application()
    app.router.add_get("/health", ok)
    app.router.add_get("/metrics", metrics)
    runner, url = await _serve(app)
    try:
        async with ApiClient(url, timeout=2) as c:
            mon = ServingMonitor(c, lambda s: None)
            looks = [await mon.poll_once() for _ in range(3)]
    finally:
        await runner.cleanup()
    assert [s.status for s in looks] == ["ok", "ok", "ok"] and looks[-1].health_path == "/health"
    assert looks[-1].gen_tokens_total == 7.0


async def test_refused_after_answering_is_a_warning_then_down():
    runner, url = await _serve(create_app(FixedBackend()))
    async with ApiClient(url, timeout=2) as c:
        mon = ServingMonitor(c, lambda s: None)
        assert (await mon.poll_once()).status == "ok"
        await runner.cleanup()
        looks = [await mon.poll_once() for _ in range(MISSES_FOR_RED)]
        assert [s.status for s in looks] == ["missed", "missed", "unreachable"]
        assert looks[-1].miss == "refused: down" and looks[-1].healthy is False
        fresh = ServingMonitor(c, lambda s: None)  # never answered: down at once (nothing to forgive)
        assert (await fresh.poll_once()).status == "unreachable"
