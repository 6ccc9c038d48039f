"""Kept chats and the SLO question against the real vLLM server of this tier: ``chat --save
--export`` keeps and writes the tiny model's known reasoning and answer; ``bench --slo`` computes
goodput from real replies (a generous SLO: every request; an impossible one: none, said in one line)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

from console.serving.bench import BenchRunner
from console.serving.bench_model import BenchSettings
from console.serving.bench_stats import parse_slo
from console.serving.chat_store import ChatStore
from console.serving.client import ApiClient

_spec = importlib.util.spec_from_file_location("engine_build_model", Path(__file__).with_name("build_model.py"))
_mod = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_mod)
EXPECTED = _mod.EXPECTED


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "console", *args], capture_output=True, text=True, timeout=300)


def test_chat_save_and_export_keep_the_real_reasoning(engine, tmp_path) -> None:
    md, js = tmp_path / "chat.md", tmp_path / "chat.json"
    for path, save in ((md, ["--save"]), (js, [])):
        p = cli("chat", "--url", engine.url, "--api-key", engine.api_key, "-m", "hi", "--max-tokens", "64",
                "--export", str(path), *save)
        assert p.returncode == 0, p.stderr
    kept = ChatStore().list_sessions()
    assert len(kept) == 1 and kept[0].model == engine.model
    reply = ChatStore().load(kept[0].id).turns[0].result
    assert reply.reasoning.strip() == EXPECTED["reasoning"] and reply.content.strip() == EXPECTED["content"]
    text = md.read_text()
    fold = text[text.index("<details>"):text.index("</details>")]
    assert EXPECTED["reasoning"] in fold and EXPECTED["content"] in text[text.index("</details>"):]
    data = json.loads(js.read_text())
    assert data["turns"][0]["reply"]["usage"]["completion_tokens"] == EXPECTED["completion_tokens"]
    assert engine.api_key not in text + js.read_text()


async def test_goodput_on_real_replies(engine) -> None:
    easy = parse_slo(["time_to_first_token:600000", "e2el:600000"])
    hard = parse_slo(["ttft:0.001"])
    async with ApiClient(engine.url, api_key=engine.api_key, stream_timeout=120) as c:
        ok = await BenchRunner(c, engine.model, BenchSettings((1, 2), requests_per_level=4, warmup=1, max_tokens=64,
                                                              slo=easy)).run()
        none = await BenchRunner(c, engine.model, BenchSettings((1,), requests_per_level=2, warmup=0, max_tokens=64,
                                                                slo=hard)).run()
    assert [lv.goodput_pct for lv in ok.levels] == [100.0, 100.0]
    answer = ok.to_json()["slo"]["answers"][0]
    assert answer["max_concurrency"] == 2 and "up to C2 users" in answer["line"]
    assert none.levels[0].goodput_pct == 0.0 and none.levels[0].slo_met == 0
    assert "NO level" in none.to_json()["slo"]["answers"][0]["line"]
    for lv in ok.levels:  # the order-statistic interval holds its percentile when it has both sides
        for name, (lo, hi) in lv.ci95.items():
            v = getattr(lv, name)
            if lo is not None and hi is not None:
                assert lo <= v <= hi
