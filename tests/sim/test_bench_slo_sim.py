"""The SLO question against the simulated API: goodput per level from real streamed replies, the
largest concurrency within the SLO as one line, prompt depths (warm-up too), JSON + CSV + SVG +
HTML with outside text escaped, and speculative decoding that accepts nothing reported."""

from __future__ import annotations

import asyncio
import csv
import io
import json

import pytest

from console.serving import bench as bench_mod
from console.serving.bench import BenchRunner
from console.serving.bench_model import BenchSettings
from console.serving.bench_stats import parse_slo
from tests.sim.test_bench_sim import _cli, api  # noqa: F401 - the fixture


async def test_goodput_splits_on_the_slo_and_the_line_names_the_level(api):  # noqa: F811
    client = await api(tokens_per_s=200.0, max_num_seqs=1)  # one at a time: C4 queues, TTFT grows
    # C1: ~0.35 s a request here; at C4 the third and fourth wait two and three of those first
    slo = parse_slo(["e2el:800"], target_pct=90)
    settings = BenchSettings((1, 4), requests_per_level=4, warmup=0, max_tokens=20, ignore_eos=True, slo=slo)
    report = await BenchRunner(client, "glm-5.3", settings).run()
    c1, c4 = report.levels
    assert c1.goodput_pct == 100.0 and c1.slo_met == 4
    assert c4.goodput_pct is not None and c4.goodput_pct < 90.0
    data = report.to_json()
    answer = data["slo"]["answers"][0]
    assert answer["max_concurrency"] == 1 and "up to C1 users" in answer["line"] and "(C4: " in answer["line"]
    assert data["slo"]["objectives_ms"] == {"e2el": 800.0} and data["slo"]["metrics"] == {"e2el": "latency"}
    lv = data["levels"][0]
    assert {"ttft_ms_p50", "ttft_ms_p90", "ttft_ms_p99", "itl_ms_p90", "latency_s_p90", "ci95"} <= set(lv)
    assert lv["ci95"]["latency_s_p50"] == [None, None]  # 4 requests cannot bound a median at 95%: said so


async def test_depth_reaches_the_prompt_of_warmup_and_measured_requests(api, monkeypatch):  # noqa: F811
    client = await api(tokens_per_s=2000.0)
    seen: list[int] = []
    real = bench_mod.at_depth

    def spy(msgs, depth, n):
        seen.append(depth)
        return real(msgs, depth, n)

    monkeypatch.setattr(bench_mod, "at_depth", spy)
    settings = BenchSettings((1,), requests_per_level=2, warmup=1, max_tokens=8, ignore_eos=True, depths=(0, 2000))
    report = await BenchRunner(client, "glm-5.3", settings).run()
    assert seen == [0, 0, 0, 2000, 2000, 2000]  # the warm-up at each depth too
    shallow, deep = report.levels
    assert (shallow.depth, deep.depth) == (0, 2000)
    assert deep.input_tokens_mean > shallow.input_tokens_mean + 1000  # the server saw the context
    assert set(report.to_json(with_requests=True)["requests"]) == {"1", "1@2000"}


async def test_spec_decode_accepting_nothing_is_a_warning(api, monkeypatch):  # noqa: F811
    from console.sim import api_scheduler

    monkeypatch.setattr(api_scheduler, "MTP_ACCEPT", (0.0,))
    client = await api(tokens_per_s=2000.0, num_speculative_tokens=3)
    settings = BenchSettings((1,), requests_per_level=2, warmup=0, max_tokens=20, ignore_eos=True)
    report = await BenchRunner(client, "glm-5.3", settings).run()
    lv = report.levels[0]
    assert lv.spec_drafts and lv.spec_accept_length == 1.0
    assert any("acceptance length exactly 1.00" in w for w in report.warnings)


async def test_spec_decode_that_works_is_no_warning(api):  # noqa: F811
    client = await api(tokens_per_s=2000.0, num_speculative_tokens=3)
    settings = BenchSettings((1,), requests_per_level=2, warmup=0, max_tokens=40, ignore_eos=True)
    report = await BenchRunner(client, "glm-5.3", settings).run()
    assert report.levels[0].spec_accept_length > 1.0
    assert not any("acceptance length" in w for w in report.warnings)


async def test_cli_slo_line_and_the_four_files(api, tmp_path):  # noqa: F811
    client = await api(tokens_per_s=2000.0, model="<b>m</b>")
    out = tmp_path / "run"
    proc = await asyncio.to_thread(_cli, "bench", "--url", client.base_url, "--concurrency", "1,2",
                                   "--requests-per-level", "3", "--warmup", "0", "--max-tokens", "10",
                                   "--ignore-eos", "--slo", "time_to_first_token:60000", "tpot:60000",
                                   "--depth", "0,300", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "within SLO (time_to_first_token <= 60000 ms, tpot <= 60000 ms; 90% of requests) at depth 0: up " \
        "to C2 users" in proc.stdout
    assert "at depth 300" in proc.stdout and "good%" in proc.stdout
    data = json.loads((tmp_path / "run.json").read_text())
    assert [(lv["depth"], lv["concurrency"]) for lv in data["levels"]] == [(0, 1), (0, 2), (300, 1), (300, 2)]
    assert data["settings"]["decode_floor"] == {"min_tokens": 16, "min_decode_ms": 10.0}
    assert data["settings"]["ci"].startswith("order-statistic")
    rows = list(csv.DictReader(io.StringIO((tmp_path / "run.csv").read_text())))
    assert rows[0]["goodput_pct"] == "100.0" and "ttft_ms_p99_ci95_lo" in rows[0]
    svg = (tmp_path / "run.svg").read_text()
    page = (tmp_path / "run.html").read_text()
    assert svg.startswith("<svg") and "<polyline" in svg and "depth 300" in svg
    assert "<b>m</b>" not in page + svg and "&lt;b&gt;m&lt;/b&gt;" in page  # the model id is text
    assert "up to C2 users" in page and "<svg" in page


@pytest.mark.parametrize("argv, needle", [
    (["--slo", "itl:5"], "expected NAME:MS"),
    (["--slo", "ttft"], "expected NAME:MS"),
    (["--slo", "ttft:-1"], "more than 0"),
    (["--slo", "ttft:nan"], "more than 0"),
    (["--slo", "ttft:5", "--slo-target", "0"], "--slo-target"),
    (["--depth", "-5"], "--depth"),
    (["--decode-floor", "-1"], "--decode-floor"),
])
def test_bad_slo_depth_or_floor_is_one_line_exit_2(argv, needle):
    proc = _cli("bench", "--url", "http://127.0.0.1:9", *argv, timeout=60)
    assert proc.returncode == 2 and needle in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr
