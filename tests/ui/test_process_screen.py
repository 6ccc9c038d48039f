"""The process list on the screen (Pilot, the real app against the simulated stations): ``:`` opens the
command palette (the k9s habit); the process list shows user, container, the whole command, CPU % and
host RSS, sorts by a column, and ends the oom rehearsal's leftover process (TERM, then KILL) after a
confirmation; --read-only ends nothing."""

from __future__ import annotations

from textual.command import CommandPalette
from textual.widgets import DataTable, Static

from console.sim.world import HELD_PID
from console.ui.app import ConsoleApp
from console.ui.screens.processes import ConfirmEnd, ProcessScreen
from tests.waiting import until


def table_text(screen: ProcessScreen) -> str:
    table = screen.query_one("#proc-table", DataTable)
    return "\n".join(" | ".join(str(c) for c in table.get_row_at(i)) for i in range(table.row_count))


async def test_colon_opens_the_palette_and_the_leftover_process_is_ended(sim_factory):
    h = await sim_factory(faults=["oom"], running=False)
    app = ConsoleApp(h.config, gpu_interval_ms=200)
    async with app.run_test(size=(160, 40)) as pilot:
        await until(lambda: app.stations["B"].apps_seen and app.stations["B"].apps, what="B's GPU processes",
                    pilot=pilot)
        await pilot.press("colon")
        await until(lambda: isinstance(app.screen, CommandPalette), what="the palette on ':'", pilot=pilot)
        await pilot.press(*"process list")
        await pilot.press("enter")
        await until(lambda: isinstance(app.screen, ProcessScreen), what="the process list", pilot=pilot)
        screen = app.screen
        await until(lambda: f"B | 1 | {HELD_PID} |" in table_text(screen) and "fp8_matmul_sweep" in table_text(screen),
                    what="the leftover process with its command", pilot=pilot, detail=lambda: table_text(screen))
        row = next(r for r in table_text(screen).splitlines() if f"| {HELD_PID} |" in r).split(" | ")
        assert row[4] == "host" and row[5] == "0.4" and row[6] == "2.1 GiB" and row[7].endswith("GiB")
        assert "sorted by GPU mem" in str(screen.query_one("#proc-status", Static).render())
        await pilot.press("s")
        assert "sorted by CPU %" in str(screen.query_one("#proc-status", Static).render())
        screen.query_one("#proc-table", DataTable).move_cursor(
            row=next(i for i, k in enumerate(screen._keys) if k == f"B:{HELD_PID}"))
        await pilot.press("t")
        await until(lambda: isinstance(app.screen, ConfirmEnd), what="the confirmation", pilot=pilot)
        assert f"pid {HELD_PID} on B" in str(app.screen.query_one("#pe-what", Static).render())
        assert app.screen.focused is not None and app.screen.focused.id == "pe-no"  # Enter alone ends nothing
        await pilot.press("y")
        await until(lambda: "ended by TERM" in screen.last, what="the process ended", pilot=pilot,
                    detail=lambda: screen.last)
        await until(lambda: f"| {HELD_PID} |" not in table_text(screen), what="its row gone", pilot=pilot,
                    timeout=30, detail=lambda: (table_text(screen), h.world.state("B")["gpus"], screen.details, app.stations["B"].apps))
        assert "last: pid 4242 on B ended by TERM" in str(screen.query_one("#proc-status", Static).render())


async def test_read_only_ends_nothing(sim_factory):
    h = await sim_factory(faults=["oom"], running=False)
    app = ConsoleApp(h.config, read_only=True, gpu_interval_ms=200)
    async with app.run_test(size=(120, 35)) as pilot:
        await until(lambda: app.stations["B"].apps, what="B's GPU processes", pilot=pilot)
        await pilot.press("P")
        await until(lambda: isinstance(app.screen, ProcessScreen), what="the process list", pilot=pilot)
        screen = app.screen
        await until(lambda: screen.reads > 0, what="a read", pilot=pilot)
        assert "read-only: ending a process is disabled" in str(screen.query_one("#proc-status", Static).render())
        await pilot.press("t")
        await pilot.pause()
        assert isinstance(app.screen, ProcessScreen)  # no confirmation, nothing sent
        assert h.world.state("B")["gpus"][-1].get("held_pid") == HELD_PID


async def test_a_pid_reused_while_the_dialog_is_open_is_not_signalled(sim_factory):
    """The confirmation names the process the row showed; if the kernel gives its pid to another process
    before ``y``, nothing is sent and the screen says what holds the pid now."""
    h = await sim_factory(faults=["oom"], running=False)
    app = ConsoleApp(h.config, gpu_interval_ms=200)
    async with app.run_test(size=(160, 40)) as pilot:
        await until(lambda: app.stations["B"].apps, what="B's GPU processes", pilot=pilot)
        await pilot.press("P")
        await until(lambda: isinstance(app.screen, ProcessScreen), what="the process list", pilot=pilot)
        screen = app.screen
        await until(lambda: "fp8_matmul_sweep" in table_text(screen), what="the leftover's row", pilot=pilot,
                    detail=lambda: table_text(screen))
        screen.query_one("#proc-table", DataTable).move_cursor(
            row=next(i for i, k in enumerate(screen._keys) if k == f"B:{HELD_PID}"))
        await pilot.press("t")
        await until(lambda: isinstance(app.screen, ConfirmEnd), what="the confirmation", pilot=pilot)
        with h.world.edit("B") as st:  # the leftover exits; pid 4242 now names an unrelated process
            for g in st["gpus"]:
                if g.get("held_pid"):
                    g["held_started_at"], g["held_args"] = 1_796_000_600, "/usr/sbin/chronyd -F 1"
        await pilot.press("y")
        await until(lambda: "no longer the process shown" in screen.last, what="the refusal", pilot=pilot,
                    detail=lambda: screen.last)
        assert "chronyd -F 1" in screen.last and "ended" not in screen.last
        assert h.world.state("B")["gpus"][-1].get("held_pid") == HELD_PID  # nothing was sent
