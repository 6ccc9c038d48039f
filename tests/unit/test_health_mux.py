"""The health multiplexer (``cmdlines.health_stream``: one bash reading nvidia-smi's health rows, the
kernel log and sysfs) run for real with stand-in tools on PATH: a kernel line written in two pieces
comes out whole (an Xid 79 never reads as Xid 7), and a kernel-log flood does not starve the GPU
health rows or the rails rounds."""

from __future__ import annotations

import asyncio
import os
import stat
import time
from pathlib import Path

from console.remote.cmdlines.streams import health_stream

JOURNALCTL = """#!/bin/bash
case "$FAKE_K" in
split) printf '2026-12-05T14:00:00+0000 host kernel: NVRM: Xid (PCI:0000:01:00): 7'; sleep 0.7
       printf '9, pid=1, GPU has fallen off the bus.\\n'; sleep 60;;
flood) while :; do echo "2026-12-05T14:00:00+0000 host kernel: mlx5_core 0000:01:00.0: flood line"; done;;
esac
"""
NVIDIA_SMI = """#!/bin/bash
while :; do echo "0, 00000000:01:00.0, 0x0, 5, 5, 16, 16, 0, No, No, 100, 600, 600, 2100, 2100, 50"; sleep 0.2; done
"""


def _tools(tmp_path: Path) -> dict[str, str]:
    for name, text in (("journalctl", JOURNALCTL), ("nvidia-smi", NVIDIA_SMI)):
        p = tmp_path / name
        p.write_text(text)
        p.chmod(p.stat().st_mode | stat.S_IEXEC)
    return dict(os.environ, PATH=f"{tmp_path}:{os.environ['PATH']}")


async def _lines(env: dict[str, str], mode: str, enough, limit_s: float = 60.0) -> list[str]:
    """The stream's lines until ``enough(lines)`` (or ``limit_s``: the test then fails on what came)."""
    proc = await asyncio.create_subprocess_exec("bash", "-c", health_stream([("lo", "")], 0),
                                                stdout=asyncio.subprocess.PIPE, env=env | {"FAKE_K": mode},
                                                start_new_session=True)
    out: list[str] = []
    deadline = time.monotonic() + limit_s
    try:
        assert proc.stdout is not None
        while not enough(out) and time.monotonic() < deadline:
            try:
                line = await asyncio.wait_for(proc.stdout.readline(), 1.0)
            except TimeoutError:
                continue
            if not line:
                break
            out.append(line.decode(errors="replace").rstrip("\n"))
    finally:
        os.killpg(proc.pid, 9)
        await proc.wait()
    return out


async def test_a_kernel_line_in_two_pieces_comes_out_whole(tmp_path):
    lines = await _lines(_tools(tmp_path), "split", lambda ls: any(x.startswith("K ") for x in ls))
    kernel = [x for x in lines if x.startswith("K ")]
    assert kernel == ["K 2026-12-05T14:00:00+0000 host kernel: NVRM: Xid (PCI:0000:01:00): 79, pid=1, "
                      "GPU has fallen off the bus."], lines[-5:]


async def test_a_kernel_flood_does_not_starve_health_rows_or_rails(tmp_path):
    def enough(ls: list[str]) -> bool:
        flood = [i for i, x in enumerate(ls) if "flood line" in x]
        if len(flood) < 100:
            return False
        after = ls[flood[0]:]  # once the flood runs: health rows and whole rails rounds still come
        return sum(x.startswith("H 0,") for x in after) >= 5 and sum(x == "R @@" for x in after) >= 2
    lines = await _lines(_tools(tmp_path), "flood", enough)
    assert enough(lines), (len(lines), [x for x in lines if not x.startswith("K ")][-10:])
    assert "K @@busy" in lines  # the log is behind, and the stream says so
