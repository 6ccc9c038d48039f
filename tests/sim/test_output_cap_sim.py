"""Over SSH (the simulated station's real SSH server): a one-shot command that floods is read up to
the cap, its channel closed, the result says where it was cut, and the connection serves the next
command as before."""

from __future__ import annotations

from console.remote.bounded import cut_words
from console.remote.transport import SSHTransport


async def test_a_flood_over_ssh_is_cut_and_the_connection_goes_on(sim_factory):
    sim = await sim_factory(n=2, time_scale=0.01)
    t = SSHTransport(sim.config.station("B"), 10, 30)
    try:
        res = await t.run("yes 0123456789abcdef", max_bytes=200_000)
        assert res.cut and res.stdout.endswith(cut_words(200_000) + "\n")
        assert len(res.stdout.encode()) < 200_000 + 200
        again = await t.run("echo fine")
        assert again.ok and again.stdout == "fine\n" and not again.cut
    finally:
        await t.close()
