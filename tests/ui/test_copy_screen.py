"""The copy screen (Pilot) against the simulated stations: the plan read from both, Ctrl+R copies
over the simulated rail and says the identity check's verdict; read-only refuses; a refused plan
(a dangling symlink) starts nothing."""

from __future__ import annotations

import os
import shutil

import pytest
from rich.console import Console
from textual.app import App
from textual.widgets import Static

from console.service.copy import CopyKind
from console.ui.screens.copy import CopyScreen
from tests.waiting import until

pytestmark = pytest.mark.skipif(shutil.which("rsync") is None, reason="rsync is not installed")


class CopyApp(App):
    def __init__(self, screen: CopyScreen) -> None:
        super().__init__()
        self.copy_screen = screen

    def on_mount(self) -> None:
        self.push_screen(self.copy_screen)


def _text(screen: CopyScreen, wid: str) -> str:
    c = Console(width=160, record=True, color_system=None)
    c.print(screen.query_one(wid, Static).render())
    return c.export_text()


def _model_dirs(sim):
    md = sim.config.profile.model_dir.lstrip("/")
    return sim.world.fs_dir("A") / md, sim.world.fs_dir("B") / md


async def _small_checkpoint(sim):
    src, dst = _model_dirs(sim)
    shutil.rmtree(src)  # the simulator's sparse 500 GB checkpoint: a small one in its place
    shutil.rmtree(dst)
    src.mkdir(parents=True)
    (src / "model-00001-of-00001.safetensors").write_bytes(os.urandom(1_500_000))
    return src, dst


async def test_the_plan_then_ctrl_r_copies_and_verifies(sim_factory):
    sim = await sim_factory()
    src, dst = await _small_checkpoint(sim)
    screen = CopyScreen(sim.config, CopyKind.CHECKPOINT)
    async with CopyApp(screen).run_test(size=(150, 40)) as pilot:
        await until(lambda: "Ready: Ctrl+R copies 1.5 MB" in _text(screen, "#copy-status"), what="the plan",
                    pilot=pilot, detail=lambda: _text(screen, "#copy-status"))
        assert f"over the rail ({sim.config.station('B').rail_ip})" in _text(screen, "#copy-plan")
        await pilot.press("ctrl+r")
        await until(lambda: screen.result is not None, what="the copy", pilot=pilot, timeout=60)
        assert "✔ ok: same files, sizes and sha256 on both sides" in _text(screen, "#copy-status")
    assert (dst / "model-00001-of-00001.safetensors").read_bytes() == (src / "model-00001-of-00001.safetensors").read_bytes()


async def test_read_only_and_a_refused_plan_copy_nothing(sim_factory):
    sim = await sim_factory()
    src, dst = await _small_checkpoint(sim)
    screen = CopyScreen(sim.config, CopyKind.CHECKPOINT, read_only=True)
    async with CopyApp(screen).run_test(size=(150, 40)) as pilot:
        await until(lambda: "(read-only: refused)" in _text(screen, "#copy-status"), what="the plan", pilot=pilot)
        await pilot.press("ctrl+r")
        await pilot.pause()
        assert screen.result is None and not dst.exists()
    (src / "gone").symlink_to("nowhere")
    screen = CopyScreen(sim.config, CopyKind.CHECKPOINT)
    async with CopyApp(screen).run_test(size=(150, 40)) as pilot:
        await until(lambda: "✖ refused: symlink gone points nowhere" in _text(screen, "#copy-status"),
                    what="the refusal", pilot=pilot, detail=lambda: _text(screen, "#copy-status"))
        await pilot.press("ctrl+r")
        await pilot.pause()
        assert screen.result is None and not dst.exists()
