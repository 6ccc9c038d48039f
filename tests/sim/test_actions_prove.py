"""Launch and stop that prove themselves, against the simulated stations through the real SSH
client: the start-up timeline, readiness by a first token (with retries over real HTTP), the fit
estimate before the load, the verified stop and its faults, replace, and the operator's own
launch script."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from pathlib import Path

import pytest
from aiohttp import ClientSession, web
from test_actions import act, mutations, recorded, states  # tests/sim is on sys.path (pytest prepend mode)

from console.config import ApiSettings
from console.probes.engine_log import TIMELINE_ORDER
from console.service.actions import ServiceActions, plan_action, run_action
from console.service.history import LaunchHistory, config_key


def kv_logged(res, station: str) -> tuple[float | None, float | None]:
    ev = next(e for e in res.timeline[station] if e.event == "kv-cache")
    return ev.value("gib"), ev.value("tokens")


async def test_timeline_events_in_order_with_plausible_times_and_the_next_launch_compares(sim_factory):
    sim = await sim_factory(n=2, time_scale=0.01)
    res, _log = await act(sim.config, "launch")
    assert res.result == "ok", res.summary
    for name, expect in (("A", list(TIMELINE_ORDER)), ("B", list(TIMELINE_ORDER[:7]))):
        evs = res.timeline[name]
        assert [e.event for e in evs] == expect, (name, [e.event for e in evs])
        times = [e.at for e in evs]
        assert times == sorted(times) and times[-1] - times[0] < 60  # a 420 s cold load at 0.01 scale
    a = {e.event: e for e in res.timeline["A"]}
    weights = a["weights-end"].at - a["weights-start"].at
    assert 0.5 * 0.57 * 420 * 0.01 < weights < 3 * 0.57 * 420 * 0.01  # the sim's load takes ~57 % of the cold start
    assert a["weights-end"].value("gib") == 218.0 and "218.00 GiB" in a["weights-end"].detail
    assert a["first-token"].at >= a["health-ok"].at >= a["port-open"].at
    assert "ms after the request" in a["first-token"].detail
    doc = res.to_json()["timeline"]
    assert [e["event"] for e in doc["A"]] == list(TIMELINE_ORDER) and doc["A"][0]["at"].endswith("Z")
    # saved per launch; the next launch compares phase by phase
    recs = LaunchHistory().records(config_key(sim.config))
    assert len(recs) == 1 and recs[0]["stations"]["A"]["durations"]["weights"] > 0
    assert recs[0]["stations"]["B"]["baseline"]["gpu_used_mib"] == 0
    assert (await act(sim.config, "stop"))[0].result == "ok"
    res2, _ = await act(sim.config, "launch")
    assert res2.result == "ok", res2.summary
    assert any(n.startswith("A: weights ") and "(last time " in n for n in res2.notes), res2.notes


async def test_the_estimate_agrees_with_the_logged_kv_cache_within_10_percent(sim_factory):
    sim = await sim_factory(n=2, time_scale=0.01)
    res, _ = await act(sim.config, "launch")
    assert res.result == "ok", res.summary
    assert res.fit is not None and res.fit.ok
    for f in res.fit.fits:
        gib, tokens = kv_logged(res, f.station)
        assert gib is not None and abs(f.kv_gib - gib) / gib < 0.10, (f.station, f.kv_gib, gib)
        if tokens is not None:  # the head logs the token count
            assert abs(f.kv_tokens - tokens) / tokens < 0.10, (f.kv_tokens, tokens)
    assert any(n.startswith("A: KV cache logged ") and "estimated" in n for n in res.notes)


@pytest.mark.parametrize("fault, station, finding", [
    ("kv-too-small", "A", "kv-cache-too-small"),
    ("oom", "B", "cuda-oom"),
])
async def test_the_estimate_predicts_the_failure_before_the_load_starts(sim_factory, fault, station, finding):
    sim = await sim_factory(n=2, time_scale=0.01, faults=[fault])
    svc = ServiceActions(sim.config)
    try:
        report = await svc.estimate_fit()
    finally:
        await svc.close()
    assert not report.ok
    errors = [w for w in report.warnings() if w.severity == "error"]
    assert (errors[0].station, errors[0].id) == (station, finding), [(w.station, w.id) for w in errors]
    if fault == "oom":
        assert "pid 4242" in errors[0].text  # the leftover process nvidia-smi shows
    # the launch stops at the estimate: nothing was started, no minutes of loading
    res, log = await act(sim.config, "launch")
    assert res.result == "failed" and res.summary.startswith("the estimate says it does not fit")
    assert [s.action for s in res.steps if s.status == "failed"] == ["fit"]
    assert [m for m in mutations(log) if m[1] in ("run", "start")] == []
    # and it was right: past the estimate, the engine fails the way it said
    res, _ = await act(sim.config, "launch", skip_fit=True)
    assert res.result == "failed" and res.summary.startswith(f"{station}: {finding}: ")


class FlakyApi:
    """A real HTTP server in front of the head's API: the first chat requests get ``status``,
    the rest is passed through (streaming) to the simulated server."""

    def __init__(self, upstream: str, status: int, times: int):
        self.upstream, self.status, self.left, self.seen = upstream, status, times, 0
        self.url = ""

    async def __aenter__(self) -> FlakyApi:
        self.http = ClientSession()
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self.handle)
        self.runner = web.AppRunner(app)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        self.url = f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}"  # type: ignore[union-attr]
        return self

    async def __aexit__(self, *exc) -> None:
        await self.runner.cleanup()
        await self.http.close()

    async def handle(self, request: web.Request) -> web.StreamResponse:
        if request.path == "/v1/chat/completions":
            self.seen += 1
            if self.left > 0:
                self.left -= 1
                return web.json_response({"error": {"message": "busy", "code": self.status}}, status=self.status)
        async with self.http.request(request.method, self.upstream + request.path_qs, data=await request.read(),
                                     headers={k: v for k, v in request.headers.items() if k.lower() != "host"}) as up:
            out = web.StreamResponse(status=up.status, headers={"Content-Type": up.headers.get("Content-Type", "")})
            await out.prepare(request)
            async for chunk in up.content.iter_any():
                await out.write(chunk)
            await out.write_eof()
            return out


@pytest.mark.parametrize("status, ok", [(429, True), (503, True), (401, False)])
async def test_ready_means_a_first_token_and_busy_answers_are_retried(sim_factory, status, ok):
    sim = await sim_factory(n=2, time_scale=0.01)
    async with FlakyApi(sim.config.api.url or "", status, times=2) as api:
        cfg = dataclasses.replace(sim.config, api=ApiSettings(url=api.url))
        res, _ = await act(cfg, "launch")
    ft = next(s for s in res.steps if s.action == "first-token")
    if ok:
        assert res.result == "ok", res.summary
        assert api.seen == 3 and "(try 3)" in ft.detail
        assert res.timeline["A"][-1].event == "first-token"
    else:
        assert res.result == "failed" and api.seen == 1
        assert "healthy but refuses a chat request" in res.summary and "401" in res.summary
        assert states(sim) == {"A": "exited", "B": "exited"}  # a start that is not ready is not left up


@pytest.mark.parametrize("profile, fault, station, findings", [
    ("glm53-nvfp4-2x-gb300-vllm", "container-survives-stop@B", "B", ["stop-container-running"]),
    ("glm53-nvfp4-2x-gb300-vllm", "port-stays-open", "A", ["stop-port-open"]),
    ("glm53-nvfp4-2x-gb300-vllm", "memory-not-released@B", "B", ["stop-compute-process", "stop-memory-leak"]),
    ("glm53-flash-nvfp4-2x-gb10-sglang", "memory-not-released@B", "B", ["stop-memory-leak"]),
])
async def test_a_stop_that_does_not_come_back_clean_is_caught(sim_factory, profile, fault, station, findings):
    sim = await sim_factory(n=2, profile=profile, time_scale=0.005, faults=[fault])
    res, _ = await act(sim.config, "launch")
    assert res.result == "ok", res.summary
    log: list = []
    res = await run_action(sim.config, "stop", transports=recorded(sim.config, log), verify_timeout_s=1.0)
    assert res.result == "failed" and res.exit_code == 1
    other = "A" if station == "B" else "B"
    assert res.verified[other].clean, res.verified[other].findings
    v = res.verified[station]
    ids = [f["id"] for f in v.findings]
    assert all(f in ids for f in findings) and not v.clean, ids
    assert all(f["fix"] for f in v.findings)
    if "stop-memory-leak" in findings:
        assert "drop_caches" in next(f["fix"] for f in v.findings if f["id"] == "stop-memory-leak")
    if profile.endswith("sglang"):
        assert "nvidia-smi shows no process" in v.findings[0]["cause"]  # GB10: the leak nvidia-smi hides
    json.dumps(res.to_json()["verified"])
    # restart verifies the same before it starts again: nothing is started over a dirty station
    log.clear()
    res = await run_action(sim.config, "restart", transports=recorded(sim.config, log), verify_timeout_s=0.5)
    assert res.result == "failed" and res.summary.startswith("not restarted: the stop did not come back clean")
    assert not [m for m in mutations(log) if m[1] == "start"]


async def test_launch_replace_stops_verifies_then_starts_fresh(sim_factory):
    sim = await sim_factory(n=2, time_scale=0.005)
    assert (await act(sim.config, "launch"))[0].result == "ok"
    res, log = await act(sim.config, "launch", replace=True)
    assert res.result == "ok", res.summary
    assert mutations(log) == [("A", "stop"), ("B", "stop"), ("B", "rm"), ("B", "rename"), ("B", "run"),
                              ("A", "rm"), ("A", "rename"), ("A", "run")]
    assert res.verified["A"].clean and res.verified["B"].clean
    assert states(sim) == {"A": "running", "B": "running"}


async def test_every_preview_line_is_true_for_the_state_it_describes(sim_factory):
    sim = await sim_factory(n=2, time_scale=0.005)
    fresh = await plan_action(sim.config, "launch")
    assert fresh.running is None
    assert [c.what for c in fresh.commands if c.station == "B"][0] == \
        "keep the container glm53 (created, never started) as glm53-prev"
    assert (await act(sim.config, "launch"))[0].result == "ok"
    p = await plan_action(sim.config, "launch")
    assert p.running == "a healthy service is running on A and B; launch replaces it"
    whats = [(c.station, c.what) for c in p.commands]
    assert whats[0][0] == "A" and whats[0][1].startswith("stop the running container")
    assert ("B", "keep the container just stopped and its log as glm53-prev") in whats
    assert not any("never started" in w or "keep the stopped container" in w for _s, w in whats)
    assert p.fit is not None and p.fit.ok  # estimated as if the running service were gone


async def test_the_operators_launch_script_runs_in_order_and_proves_itself(sim_factory):
    sim = await sim_factory(n=2, time_scale=0.005, faults=["kv-too-small"])  # config asks 1M; the script 98,304
    cfg = dataclasses.replace(sim.config, launch_script="~/launch-glm53.sh")
    plan = await plan_action(cfg, "launch")
    starts = [c for c in plan.commands if c.what.startswith("start ")]
    assert [c.station for c in starts] == ["B", "A"]
    assert "run the launch script ~/launch-glm53.sh (" in starts[0].what and "bytes, sha256 " in starts[0].what
    assert starts[0].preview.startswith("#!/usr/bin/env bash") and "source ~/glm53.env" in starts[0].preview
    assert plan.fit is not None and plan.fit.ok and plan.fit.fits[0].settings.source == "launch script"
    res, log = await act(cfg, "launch")
    assert res.result == "ok", res.summary
    ran = [(st, c) for st, k, c in log if k == "run" and "nohup bash" in c]
    assert [st for st, _c in ran] == ["B", "A"]
    assert not [m for m in mutations(log) if m[1] == "run"]  # the script, not the console, ran docker run
    args = sim.world.state("A")["containers"]["glm53"]["runs"][-1]["args"]
    assert "--max-model-len" in args and "98304" in args and "--node-rank" in args
    assert [e.event for e in res.timeline["A"]][-1] == "first-token"
    res, _ = await act(cfg, "stop")
    assert res.result == "ok" and all(v.clean for v in res.verified.values())


async def test_a_launch_script_that_starts_nothing_says_so(sim_factory):
    sim = await sim_factory(n=2, time_scale=0.005)
    script = sim.world.station_dir("B") / "fs"
    home = next(script.rglob("launch-glm53.sh")).parent
    (home / "broken.sh").write_text("#!/bin/bash\necho 'GPU=: unbound variable' >&2\nexit 1\n")
    for name in ("A", "B"):
        other = next((sim.world.station_dir(name) / "fs").rglob("launch-glm53.sh")).parent
        (other / "broken.sh").write_text((home / "broken.sh").read_text())
    cfg = dataclasses.replace(sim.config, launch_script="~/broken.sh")
    res, log = await act(cfg, "launch")
    assert res.result == "failed"
    assert res.summary.startswith("B: the launch script ~/broken.sh ended without starting glm53")
    assert "unbound variable" in res.summary
    assert not [st for st, k, c in log if st == "A" and "nohup" in c]


async def test_plan_while_the_service_runs_estimates_as_if_stopped(sim_factory):
    sim = await sim_factory(n=2, time_scale=0.005, running=True)
    from console.commands.plan import estimate

    await asyncio.sleep(0)
    report, note = await estimate(sim.config)
    assert report.ok and note is not None and "as if it were stopped" in note


async def test_gb10_page_cache_below_the_utilization_offers_and_runs_the_drop_caches_step(sim_factory, tmp_path):
    """vLLM on a DGX Spark pair (NVIDIA's Spark vLLM playbook): the page cache left by copying the
    checkpoint counts as used unified memory, so vLLM would refuse to start below its share."""
    from console.config import builtin_profiles  # noqa: F401 - the profile format is the built-ins'
    from console.profiles import __file__ as profiles_init

    gb10 = (Path(profiles_init).parent / "glm53-flash-nvfp4-2x-gb10-sglang.toml").read_text()
    text = (gb10.replace('engine = "sglang"', 'engine = "vllm"')
            .replace('name = "glm53-flash-nvfp4-2x-gb10-sglang"', 'name = "glm53-flash-2x-gb10-vllm"')
            .replace('image = "lmsysorg/sglang:v0.5.23-cu130-gb10"', 'image = "vllm/vllm-openai:v0.30.0-aarch64"')
            .replace("mem_fraction_static = 0.84", "gpu_memory_utilization = 0.85\nmax_model_len = 32768\n"
                                                   "max_num_seqs = 4\nkv_cache_dtype = \"fp8\"")
            .replace("max_running_requests = 2\ncontext_length = 65536\n", "")
            .replace("dist_init_port = 20000\n", ""))  # SGLang's setting: a vLLM profile refuses it
    prof = tmp_path / "gb10-vllm.toml"
    prof.write_text(text)
    sim = await sim_factory(n=2, profile=str(prof), time_scale=0.005)
    await asyncio.sleep(1.2)  # the sim writes each station's /proc/meminfo once a second
    plan = await plan_action(sim.config, "launch")
    errors = [w for w in plan.fit.warnings() if w.severity == "error"]
    assert errors and all(w.id == "free-memory-at-startup" for w in errors), [(w.id, w.text) for w in errors]
    assert "page cache" in errors[0].text and "drop_caches" in errors[0].fix
    res, log = await act(sim.config, "launch")
    assert res.result == "failed" and "--drop-caches" in res.summary
    res, log = await act(sim.config, "launch", drop_caches=True)
    assert [s.status for s in res.steps if s.action == "drop-caches"] == ["ok", "ok"]
    fit_step = next(s for s in res.steps if s.action == "fit")
    assert fit_step.status in ("ok", "warn"), fit_step.detail
    assert res.result == "ok", res.summary
