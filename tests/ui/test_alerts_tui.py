"""The TUI's alerts (Pilot, the real app fed the messages a station's monitor posts): a GPU fallen off
the bus is a gpu-fault incident the dashboard's judge opens, its alert reaches a real HTTP receiver
on 127.0.0.1 as the webhook's JSON, and the delivery is said as a notice (an error one, with the URL
masked, when the receiver refuses it)."""

from __future__ import annotations

import time

from textual.notifications import Notify

from console.probes.nvidia_smi import GpuReading, error_reading
from console.station.messages import ConnectionState, GpuSample
from console.ui.app import ConsoleApp
from tests.receiver import Receiver
from tests.ui.pair_app import pair_config
from tests.waiting import until

LOST = "Unable to determine the device handle for GPU00000000:01:00.0: Unknown Error"
TOKEN = "tui-hook-t0ken-777"


def gb300() -> GpuReading:
    return GpuReading(1, "GPU-1", "NVIDIA GB300", 236902, 256703, 0, 41, 165.4)


async def run_lost_gpu(tmp_path, rx: Receiver) -> list[tuple[str, str, str]]:
    extra = f'\n[alerts]\nwebhook = "{rx.base}/hook/{TOKEN}"\nbell = true\nretries = 0\n'
    app = ConsoleApp(pair_config(tmp_path, extra=extra), start_services=False, clock=False)
    said: list[tuple[str, str, str]] = []

    def hook(message) -> None:
        if isinstance(message, Notify):
            n = message.notification
            said.append((n.title, n.severity, str(n.message)))

    async with app.run_test(size=(160, 45), message_hook=hook) as pilot:
        app.jobs.start("incidents", app.incidents.run)  # (the app starts it with its station services)
        now = time.time()
        for name in ("A", "B"):
            app.post_message(ConnectionState(name, "live", last_sample_at=now))
            app.post_message(GpuSample(name, [gb300()], now))
        app.post_message(GpuSample("A", [error_reading(0, LOST), gb300()], now))
        await until(lambda: any(t.startswith("Alert") for t, _, _ in said), what="the alert's notice", pilot=pilot,
                    timeout=20, detail=lambda: said)
    return said


async def test_a_lost_gpu_is_alerted_from_the_tui_and_the_delivery_said(tmp_path):
    with Receiver() as rx:
        said = await run_lost_gpu(tmp_path, rx)
        (got,) = [r.json() for r in rx.got]
        assert got["kind"] == "gpu-fault" and got["stations"] == ["A"] and LOST in got["verdict"]
        assert any(t == "Incident" and "gpu-fault on A" in m for t, _, m in said), said
        assert any(t == "Alert" and sev == "information" and "sent to webhook" in m for t, sev, m in said), said


async def test_a_refused_alert_is_an_error_notice_with_the_url_masked(tmp_path):
    with Receiver([403]) as rx:
        said = await run_lost_gpu(tmp_path, rx)
        (failed,) = [(sev, m) for t, sev, m in said if t.startswith("Alert")]
        assert failed[0] == "error" and "HTTP 403" in failed[1] and f"{rx.base}/***" in failed[1]
        assert all(TOKEN not in m for _, _, m in said)
