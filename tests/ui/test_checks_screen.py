"""The checks screen (Pilot) against the simulated stations: table, evidence and fix of the
selected check, rerun one / all, RDMA validation, and the summary posted to the app."""

from __future__ import annotations

import json

from textual.app import App
from textual.widgets import DataTable, Static

from console.station.checks import CHECK_IDS, CheckResult
from console.ui.screens.checks import ChecksDone, ChecksScreen
from tests.waiting import until


class Host(App):
    def __init__(self, screen: ChecksScreen) -> None:
        super().__init__()
        self.checks_screen = screen
        self.done: list[ChecksDone] = []

    def on_mount(self) -> None:
        self.push_screen(self.checks_screen)

    def on_checks_done(self, msg: ChecksDone) -> None:
        self.done.append(msg)


async def settle(pilot, screen: ChecksScreen, n_done: int, app: Host) -> None:
    """The checks have finished and the app has had the ``n_done``-th summary."""
    await until(lambda: not screen.busy and len(app.done) >= n_done, what=f"checks run {n_done} to finish",
                timeout=60, pilot=pilot, detail=lambda: {k: r.status for k, r in screen.results.items()})


def detail_text(screen: ChecksScreen) -> str:
    return str(screen.query_one("#checks-evidence", Static).render())


async def test_table_detail_and_reruns(sim_factory):
    h = await sim_factory(faults=["mtu-mismatch"])
    screen = ChecksScreen(h.config)
    app = Host(screen)
    async with app.run_test(size=(140, 45)) as pilot:
        await settle(pilot, screen, 1, app)
        table = screen.query_one(DataTable)
        assert table.row_count >= len(CHECK_IDS)
        keys = [row.value for row in table.rows]
        assert "mtu-mismatch@A<->B" in keys and "jumbo-ping@B->A" in keys
        assert screen.results["mtu-mismatch@A<->B"].status == "fail"
        # select the failing check: its evidence and fix are shown
        table.move_cursor(row=keys.index("mtu-mismatch@A<->B"))
        await pilot.pause()
        text = detail_text(screen)
        assert "MTU differs: A 9000, B 1500" in text and "Fix:" in text and "ip -o link show" in text
        # the app got the per-station summary
        assert app.done[-1].summary("B")["fail"] >= 3
        assert app.done[-1].summary_text("B").startswith("checks: 4 FAIL, ")
        # rerun just this check
        await pilot.press("r")
        await settle(pilot, screen, 2, app)
        assert screen.results["mtu-mismatch@A<->B"].status == "fail"
        # repair B's MTU (the fault is gone) and rerun all
        world_meta = h.world.meta
        world_meta["faults"]["B"] = []
        (h.world.root / "world.json").write_text(json.dumps(world_meta))
        await pilot.press("a")
        await settle(pilot, screen, 3, app)
        assert screen.results["mtu-mismatch@A<->B"].status == "pass"
        assert screen.results["jumbo-ping@B->A"].status == "pass"


async def test_rdma_validation_from_the_screen(sim):
    screen = ChecksScreen(sim.config, autostart=False)
    app = Host(screen)
    async with app.run_test(size=(140, 45)) as pilot:
        await pilot.press("v")
        await settle(pilot, screen, 1, app)
        rows = [r for r in screen.results.values() if r.id == "rdma-bandwidth"]
        assert len(rows) == 8 and all(r.status == "pass" for r in rows)  # both directions
        assert any("mlx5_1 gpu" in r.station for r in rows)
        assert {r.station.split()[0] for r in rows} == {"A->B", "B->A"}


SNAP_RESULTS = [
    CheckResult("link-down", "A", "pass", "enp1s0f1np1: link detected", "$ ethtool enp1s0f1np1\n\tLink detected: yes"),
    CheckResult("mtu-mismatch", "A<->B", "fail", "MTU differs: A 9000, B 1500",
                "[A] $ ip -o link show dev enp1s0f1np1\n4: enp1s0f1np1: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 9000",
                "Set the same MTU on both ends: `sudo ip link set dev enp1s0f1np1 mtu 9000`."),
    CheckResult("jumbo-ping", "B->A", "fail", "B's own rail MTU is 1500, below 9000",
                "ping: local error: message too long, mtu=1500", "On B: `sudo ip link set dev enp1s0f1np1 mtu 9000`."),
    CheckResult("clock-skew", "A<->B", "pass", "B is 3 ms ahead of A (+/- 40 ms)"),
    CheckResult("api-exposed", "A", "warn", "the API binds 0.0.0.0:8000 on every interface without --api-key"),
    CheckResult("link-down", "B", "skip", "unreachable: B: no answer from 198.19.0.6 within 3 s"),
]


async def test_rows_fill_in_as_checks_finish_and_cancel_marks_the_rest(sim):
    screen = ChecksScreen(sim.config)
    app = Host(screen)
    async with app.run_test(size=(140, 45)) as pilot:
        await pilot.pause()
        statuses = {r.status for r in screen.results.values()}
        assert "running" in statuses  # placeholders for every planned check
        def seen() -> set[str]:
            return {r.status for r in screen.results.values()}

        # the first finished checks appear while the others still run
        await until(lambda: "running" in seen() and seen() & {"pass", "warn"},
                    what="some checks done, some running", timeout=20, pilot=pilot, detail=seen)
        await pilot.press("c")
        await pilot.pause()
        assert not screen.busy
        assert "running" not in {r.status for r in screen.results.values()}
        assert any(r.summary == "cancelled" for r in screen.results.values())


async def test_first_view_has_focus_failures_first_and_a_wide_summary():
    """What the operator reads first: the table has the keys at once (Down / j), failures are
    sorted first with the first one's detail shown, and the summary column takes the width."""
    from console.config import parse_config

    cfg = parse_config('[[stations]]\nname = "A"\nhost = "a"\nrank = 0\n[[stations]]\nname = "B"\nhost = "b"\nrank = 1\n')
    long = CheckResult("jumbo-ping", "A->B", "fail", "100% loss with DF set and no error: the far end (B) or a hop "
                       "drops 9000-byte frames (MTU smaller there), or the link is down")
    screen = ChecksScreen(cfg, results=[*SNAP_RESULTS, long], autostart=False)
    app = Host(screen)
    async with app.run_test(size=(200, 50)) as pilot:
        await pilot.pause()
        table = screen.query_one(DataTable)
        assert app.focused is table
        statuses = [screen.results[row.value].status for row in table.rows]
        assert statuses == sorted(statuses, key=["fail", "warn", "running", "skip", "pass"].index)
        assert "mtu-mismatch  A<->B  FAIL" in detail_text(screen)  # the first failure, not row 1 of the plan
        widths = {c.key.value: c.width for c in table.columns.values()}
        assert widths["summary"] >= 130, widths
        await pilot.press("j")
        await pilot.pause()
        assert "jumbo-ping  B->A  FAIL" in detail_text(screen)
        await pilot.press("down")
        await pilot.pause()
        assert "jumbo-ping  A->B  FAIL" in detail_text(screen)
        # a narrower terminal: the summary column follows
        await pilot.resize_terminal(80, 24)
        await pilot.pause()
        widths = {c.key.value: c.width for c in table.columns.values()}
        assert widths["summary"] >= 20 and sum(w + 2 for w in widths.values()) <= 80 - 2
        assert "jumbo-ping  A->B  FAIL" in detail_text(screen)  # the operator's row is kept
