"""Snapshots of the screens pushed over the dashboard (chat, bench, checks, action dialogs) at the
three sizes an operator's terminal has (200x50, 120x35, 80x24). Fixed data, no clock, no live
service: each screen gets what its workers would have handed it. Behaviour is tested against the
simulated stations in the other files; these catch what a layout change does to the screen."""

from __future__ import annotations

import time

import pytest
from textual.app import App
from textual.widgets import Input

from console.probes.engine_log import TimelineEvent
from console.service.actions import ActionEvent, ActionResult, PlannedCommand, Step
from console.serving.bench_model import BenchProgress, RequestRecord, summarize
from console.serving.chat import ChatResult
from console.station.checks import CheckResult
from console.ui.screens.actions import ActionProgressScreen, ConfirmActionScreen
from console.ui.screens.bench import BenchScreen, BenchUpdate
from console.ui.screens.chat import ChatScreen, chat_session
from console.ui.screens.checks import ChecksScreen
from tests.ui.pair_app import pair_config
from tests.waiting import until

SIZES = [(200, 50), (120, 35), (80, 24)]
T0 = 1764590400.0  # 2025-12-01 12:00:00 UTC: every time shown is fixed


@pytest.fixture(autouse=True)
def _utc(monkeypatch):
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


class Host(App):
    """Pushes one screen, as the dashboard would."""

    def __init__(self, make) -> None:
        super().__init__()
        self.make = make

    def on_mount(self) -> None:
        self.push_screen(self.make(self))


async def _still(pilot) -> None:
    """No blinking cursor in a snapshot."""
    await pilot.pause()
    for inp in pilot.app.screen.query(Input):
        inp.cursor_blink = False
    await pilot.pause()


# ------------------------------------------------------------------ chat

REASONING = ("The user asks which transport NCCL uses between the two stations. The log lines "
             "'via NET/IB/0/GDRDMA' say GPUDirect RDMA over the ConnectX-8 rail.")
ANSWER = ("NCCL runs over **GPUDirect RDMA** on the 400 Gb/s RoCE rail (mlx5_0, mlx5_1): every channel "
          "line reads `via NET/IB/0/GDRDMA`, and no socket fallback was logged.")


def chat_app() -> Host:
    url = "http://127.0.0.1:8000"

    def make(app):
        session = chat_session(app, url)
        session.turns.append(("Which transport does NCCL use between A and B?",
                              ChatResult(content=ANSWER, reasoning=REASONING, finish_reason="stop",
                                         usage={"completion_tokens": 96}, ttft_s=0.48, tokens_per_s=41.2)))
        return ChatScreen(url, model="glm-5.3")

    return Host(make)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_chat(snap_compare, size):
    assert snap_compare(chat_app(), terminal_size=size, run_before=_still)


# ------------------------------------------------------------------ bench

def _level(c: int, tok_s_each: float, ttft: float) -> object:
    n = 10 * c
    lat = 1000 / tok_s_each + ttft
    records = [RequestRecord(i * 0.01, i * 0.01 + lat, ttft, lat, 1000, 1000) for i in range(n)]
    return summarize(c, records, server_tokens=1000 * n)


def bench_app(tmp_path) -> Host:
    cfg = pair_config(tmp_path, api_url="http://127.0.0.1:8000")
    return Host(lambda app: BenchScreen(cfg, results_dir=tmp_path / "results"))


async def _bench_done(pilot) -> None:
    screen = pilot.app.screen
    screen.query_one("#concurrency", Input).value = "1,8,16"
    await pilot.pause()
    screen.comparison = screen._comparison_now()
    screen._columns(screen.comparison)
    for i, (c, each, ttft) in enumerate([(1, 110.0, 0.45), (8, 50.0, 0.43), (16, 39.0, 0.49)]):
        screen.post_message(BenchUpdate(BenchProgress(i, 3, c, "done", 10 * c, 10 * c, result=_level(c, each, ttft))))
        await pilot.pause()
    screen._status("✔ done")
    await _still(pilot)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_bench(snap_compare, size, tmp_path):
    assert snap_compare(bench_app(tmp_path), terminal_size=size, run_before=_bench_done)


# ------------------------------------------------------------------ checks

CHECKS = [
    CheckResult("link-down", "A", "pass", "enp1s0f1np1: link detected", "$ ethtool enp1s0f1np1\n\tLink detected: yes"),
    CheckResult("link-speed", "A", "pass", "enp1s0f1np1: 400000 Mb/s"),
    CheckResult("link-speed", "B", "pass", "enp1s0f1np1: 400000 Mb/s"),
    CheckResult("mtu-value", "B", "fail", "enp1s0f1np1: MTU 1500, the profile wants 9000",
                "$ ip -o link show dev enp1s0f1np1\n4: enp1s0f1np1: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500",
                "Set the same MTU on both ends: `sudo ip link set dev enp1s0f1np1 mtu 9000` on each station."),
    CheckResult("mtu-mismatch", "A<->B", "fail", "MTU differs: A 9000, B 1500",
                "[A] mtu 9000\n[B] mtu 1500", "Set the same MTU on both ends."),
    CheckResult("jumbo-ping", "A->B", "fail", "100% loss with DF set and no error: the far end (B) or a hop drops "
                "9000-byte frames (MTU smaller there), or the link is down"),
    CheckResult("clock-skew", "A<->B", "pass", "B is 3 ms ahead of A (+/- 40 ms)"),
    CheckResult("api-exposed", "A", "warn", "the API binds 0.0.0.0:8000 on every interface without --api-key"),
    CheckResult("roce-gid", "A", "pass", "RoCE v2 GID index 3 for 198.18.0.1"),
    CheckResult("roce-gid", "B", "pass", "RoCE v2 GID index 3 for 198.18.0.2"),
]


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_checks(snap_compare, size):
    cfg = pair_config()
    assert snap_compare(Host(lambda app: ChecksScreen(cfg, results=CHECKS, autostart=False)), terminal_size=size,
                        run_before=_still)


# ------------------------------------------------------------------ actions

PLAN = [
    PlannedCommand("B", "start the worker (rank 1) (hang evidence: SYS_PTRACE for py-spy, flight recorder: "
                   "last 2,000 collectives per rank)",
                   "docker run -d --name glm53 --network host --ipc host --gpus device=GPU-b1 "
                   "--cap-add SYS_PTRACE -e TORCH_NCCL_TRACE_BUFFER_SIZE=2000 "
                   "vllm/vllm-openai:v0.30.0-aarch64 serve /models/GLM-5.3-NVFP4 --tensor-parallel-size 2 "
                   "--nnodes 2 --node-rank 1 --master-addr 198.18.0.1 --headless"),
    PlannedCommand("A", "start the head (rank 0, API) (hang evidence: SYS_PTRACE for py-spy, flight recorder: "
                   "last 2,000 collectives per rank)",
                   "docker run -d --name glm53 --network host --ipc host --gpus device=GPU-a1 "
                   "--cap-add SYS_PTRACE -e TORCH_NCCL_TRACE_BUFFER_SIZE=2000 "
                   "vllm/vllm-openai:v0.30.0-aarch64 serve /models/GLM-5.3-NVFP4 --tensor-parallel-size 2 "
                   "--nnodes 2 --node-rank 0 --master-addr 198.18.0.1 --host 0.0.0.0 --port 8000"),
    PlannedCommand("A", "wait for the first token", "POST /v1/chat/completions (stream, 1 token)"),
]


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_confirm_launch(snap_compare, size):
    assert snap_compare(Host(lambda app: ConfirmActionScreen("launch", PLAN)), terminal_size=size, run_before=_still)


def _scripted_launch():
    """What the launch reported on one run, replayed (the real action runs in test_actions_screen)."""

    async def run(on_event, ask):
        steps = [Step("B", "docker run (worker)", "ok", T0, T0 + 1.2, "container 3f2a started"),
                 Step("A", "docker run (head)", "ok", T0 + 1.5, T0 + 2.6, "container 9c1e started"),
                 Step("A", "first token", "ok", T0 + 2.6, T0 + 420.0, "ready after 417.4 s"),
                 Step("all", "transport", "ok", T0 + 420.0, T0 + 420.1, "GPUDirect RDMA on both")]
        for st in steps:
            on_event(ActionEvent("step", st.station, st.action, step=st))
        for station in ("A", "B"):
            for i, (ev, detail) in enumerate([("nccl-init", "2 ranks"), ("weights-end", "218.00 GiB in 239.4 s"),
                                               ("kv-cache", "1,234,560 tokens"), ("ready", "")]):
                on_event(ActionEvent("timeline", station, ev, timeline=TimelineEvent(ev, T0 + 60 * (i + 1), detail)))
        on_event(ActionEvent("log", "A", "INFO:     Application startup complete."))
        return ActionResult("launch", steps=steps, result="ok", transport="gdrdma",
                            summary="the service is up: first token after 417.4 s")

    return run


async def _launched(pilot) -> None:
    screen = pilot.app.screen
    await until(lambda: screen.result is not None, what="the launch's result", pilot=pilot)
    await _still(pilot)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_launch_progress(snap_compare, size):
    app = Host(lambda app: ActionProgressScreen("launch", _scripted_launch()))
    assert snap_compare(app, terminal_size=size, run_before=_launched)
