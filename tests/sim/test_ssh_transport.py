"""The real SSH client path (asyncssh, strict known_hosts) against the in-process sim server."""

import asyncio
import dataclasses
import time

import asyncssh
import pytest

from console.remote.transport import HostKeyError, SSHTransport, Unreachable


def transport_for(handle, name="A", **changes):
    st = dataclasses.replace(handle.config.station(name), **changes)
    return SSHTransport(st, connect_timeout=2.0, command_timeout=10.0)


async def test_run_command_through_real_ssh(sim):
    t = transport_for(sim)
    try:
        res = await t.run("echo hello; echo oops >&2; exit 3")
        assert res.exit_status == 3 and res.stdout == "hello\n" and res.stderr == "oops\n"
        smi = await t.run("nvidia-smi -L")
        assert "NVIDIA GB300" in smi.stdout
        echo = await t.run("cat", input="piped stdin\n")
        assert echo.stdout == "piped stdin\n"
    finally:
        await t.close()


async def test_unknown_host_key_is_refused_with_fingerprint(sim, tmp_path):
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    t = transport_for(sim, known_hosts=str(empty))
    with pytest.raises(HostKeyError) as ei:
        await t.run("true")
    real = asyncssh.read_private_key(str(sim.world.root / "keys" / "host_A_ed25519")).get_fingerprint("sha256")
    assert ei.value.fingerprint == real
    assert real in str(ei.value) and "is unknown" in str(ei.value) and "ED25519" in str(ei.value)
    # Trusting is explicit and only for the fingerprint that was shown.
    with pytest.raises(HostKeyError):
        await t.trust_host_key("SHA256:somethingelse")
    assert empty.read_text() == ""
    assert await t.trust_host_key(real) == real
    assert "ssh-ed25519" in empty.read_text()
    assert (await t.run("echo ok")).stdout == "ok\n"
    await t.close()


async def test_changed_host_key_is_refused(sim, tmp_path):
    other = asyncssh.generate_private_key("ssh-ed25519").export_public_key("openssh").decode().strip()
    ep = sim.server.endpoints["A"]
    kh = tmp_path / "known_hosts"
    kh.write_text(f"[127.0.0.1]:{ep.port} {other}\n")
    t = transport_for(sim, known_hosts=str(kh))
    with pytest.raises(HostKeyError, match="has CHANGED"):
        await t.run("true")


async def test_station_that_does_not_answer_times_out_while_other_works(sim_factory):
    h = await sim_factory(faults=["station-unreachable@B"])
    a, b = transport_for(h, "A"), transport_for(h, "B")
    start = time.monotonic()
    res_a, res_b = await asyncio.gather(a.run("echo A"), b.run("echo B"), return_exceptions=True)
    elapsed = time.monotonic() - start
    assert not isinstance(res_a, Exception) and res_a.stdout == "A\n"
    assert isinstance(res_b, Unreachable) and "no answer" in str(res_b)
    assert elapsed < 10  # bounded by the connect timeout, never a hang
    await a.close()


async def test_closing_a_stream_ends_the_remote_process(sim):
    t = transport_for(sim)
    stream = t.stream("exec nvidia-smi --query-gpu=index --format=csv,noheader -lms 100")
    lines = []
    async for line in stream:
        lines.append(line)
        if len(lines) >= 4:
            break
    await stream.aclose()
    assert lines[:2] == ["0", "1"]
    for _ in range(50):  # the server kills the process group when the channel closes
        if not sim.server._children:
            break
        await asyncio.sleep(0.1)
    assert not sim.server._children
    await t.close()


async def test_many_concurrent_commands_share_one_connection(sim):
    t = transport_for(sim)
    results = await asyncio.gather(*(t.run(f"echo {i}") for i in range(20)))
    assert [r.stdout for r in results] == [f"{i}\n" for i in range(20)]
    assert t.connects == 1
    await t.close()


async def test_refused_port_is_unreachable(sim):
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    t = transport_for(sim, port=port)
    with pytest.raises(Unreachable, match="cannot connect"):
        await t.run("true")
