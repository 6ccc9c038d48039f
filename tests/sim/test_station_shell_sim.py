"""The console's real command lines against the simulated stations: each station answers from its own
tree and environment (console/sim/station_shell.py), and the server logs the command exactly as the
console sent it."""

from __future__ import annotations

from console.probes.meminfo import parse_meminfo
from console.remote import cmdlines as rc
from console.remote.session import make_transport
from console.sim.shims._stationfs import env_text


async def test_real_paths_resolve_in_each_station_tree(sim_factory):
    h = await sim_factory(n=2)
    for name in h.world.names:
        t = make_transport(h.config.station(name), h.config.connect_timeout_s, h.config.command_timeout_s)
        try:
            mem = parse_meminfo((await t.run(rc.meminfo_once())).stdout)
            assert mem.total_mib == h.world.state(name)["host_mem_total_mib"]  # the station's, not this machine's
            env = await t.run(rc.read_file("~/glm53.env"))
            assert env.ok and env.stdout == env_text(h.world, name)  # each station its own file
            counters = await t.run(rc.rdma_counters("mlx5_0"))
            assert counters.ok and "port_rcv_errors:0" in counters.stdout
            cfg = await t.run(rc.model_config(h.world.profile.model_dir))
            assert cfg.ok and '"architectures"' in cfg.stdout
        finally:
            await t.close()
        sent = [c for s, c in h.server.command_log if s == name]
        assert sent[-4:] == [rc.meminfo_once(), rc.read_file("~/glm53.env"), rc.rdma_counters("mlx5_0"),
                             rc.model_config(h.world.profile.model_dir)]


async def test_ssh_to_the_peer_runs_in_the_peer_environment(sim_factory):
    h = await sim_factory(n=2)
    peer_ip = h.world.state("B")["rail"]["ip"]
    t = make_transport(h.config.station("A"), h.config.connect_timeout_s, h.config.command_timeout_s)
    try:
        res = await t.run(f"ssh -o BatchMode=yes -- {peer_ip} 'echo \"$HOME\" /proc/meminfo; cat ~/glm53.env'")
    finally:
        await t.close()
    where, *env = res.stdout.splitlines(keepends=True)
    home, meminfo = where.split()
    assert res.ok and home.startswith(str(h.world.fs_dir("B")))
    assert meminfo == str(h.world.fs_dir("B") / "proc/meminfo")  # bound on A, bound back to B's own on B
    assert "".join(env) == env_text(h.world, "B")
