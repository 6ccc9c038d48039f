"""The real SSH client path (asyncssh, strict known_hosts) against the in-process sim server."""

import asyncio
import dataclasses
import time

import asyncssh
import pytest

from console.remote.transport import HostKeyError, SSHTransport, Unreachable
from tests.ports import refused_port
from tests.waiting import until


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
    # the server kills the process group when the channel closes
    await until(lambda: not sim.server.children, what="the remote process to end", timeout=5,
                detail=lambda: sim.server.children)
    await t.close()


async def test_many_concurrent_commands_share_one_connection(sim):
    t = transport_for(sim)
    results = await asyncio.gather(*(t.run(f"echo {i}") for i in range(20)))
    assert [r.stdout for r in results] == [f"{i}\n" for i in range(20)]
    assert t.connects == 1
    await t.close()


async def test_refused_port_is_unreachable(sim):
    t = transport_for(sim, port=refused_port())
    with pytest.raises(Unreachable, match="cannot connect"):
        await t.run("true")


def _hashed(host_pattern: str) -> str:
    """An OpenSSH hashed host name (HashKnownHosts yes): |1|salt|hmac-sha1(salt, name)."""
    import base64
    import hashlib
    import hmac
    import os

    salt = os.urandom(20)
    digest = hmac.new(salt, host_pattern.encode(), hashlib.sha1).digest()
    return f"|1|{base64.b64encode(salt).decode()}|{base64.b64encode(digest).decode()}"


async def test_changed_key_names_both_keys_refuses_trust_and_is_replaced_only_by_its_fingerprint(sim, tmp_path):
    from console.remote.host_keys import connect_with_trust

    old = asyncssh.generate_private_key("ssh-ed25519")
    ep = sim.server.endpoints["A"]
    kh = tmp_path / "known_hosts"
    unrelated = "[10.0.0.9]:22 " + asyncssh.generate_private_key("ssh-ed25519").export_public_key().decode()
    kh.write_text(f"{unrelated}{_hashed(f'[127.0.0.1]:{ep.port}')} {old.export_public_key().decode()}")
    before = kh.read_text()
    t = transport_for(sim, known_hosts=str(kh))
    real = asyncssh.read_private_key(str(sim.world.root / "keys" / "host_A_ed25519")).get_fingerprint("sha256")
    with pytest.raises(HostKeyError) as ei:
        await t.run("true")
    err = ei.value
    assert err.changed and err.offered.fingerprint == real and err.offered.type == "ED25519"
    assert [k.fingerprint for k in err.known] == [old.get_fingerprint("sha256")]  # found under its hashed name
    assert "has CHANGED" in str(err) and f"ED25519 {real}" in str(err)
    # --trust-host-key never replaces a changed key
    with pytest.raises(HostKeyError, match="has CHANGED"):
        await connect_with_trust(t, trust=True)
    with pytest.raises(HostKeyError, match="has CHANGED"):
        await t.trust_host_key(real)
    with pytest.raises(HostKeyError, match="not the offered key"):
        await connect_with_trust(t, trust=False, replace="SHA256:" + "B" * 43)
    assert kh.read_text() == before
    await connect_with_trust(t, trust=False, replace=real)
    after = kh.read_text()
    assert unrelated in after and old.export_public_key().decode().split()[1] not in after  # old line removed
    assert after.count(f"[127.0.0.1]:{ep.port} ssh-ed25519 ") == 1
    assert (await t.run("echo ok")).stdout == "ok\n"
    await t.close()


async def test_ed25519_is_preferred_and_shown_with_its_type(tmp_path):
    """A server with an RSA and an ED25519 key: the console asks for ED25519 first, as ssh does
    (asyncssh's own default offers RSA first)."""
    rsa = asyncssh.generate_private_key("ssh-rsa")
    ed = asyncssh.generate_private_key("ssh-ed25519")
    server = await asyncssh.listen("127.0.0.1", 0, server_host_keys=[rsa, ed], authorized_client_keys=None)
    port = server.sockets[0].getsockname()[1]
    try:
        from console.config import Station

        empty = tmp_path / "kh"
        empty.write_text("")
        st = Station(name="X", host="127.0.0.1", port=port, rank=0, known_hosts=str(empty))
        t = SSHTransport(st, connect_timeout=3.0, command_timeout=5.0)
        with pytest.raises(HostKeyError) as ei:
            await t.connect()
        assert ei.value.kind == "unknown" and ei.value.offered.type == "ED25519"
        assert ei.value.fingerprint == ed.get_fingerprint("sha256")
    finally:
        server.close()


def _host_pub(sim, name="A") -> str:
    return asyncssh.read_private_key(str(sim.world.root / "keys" / f"host_{name}_ed25519")).export_public_key().decode()


async def test_a_revoked_key_is_refused_in_its_own_words_and_never_trusted_or_replaced(sim, tmp_path):
    """``@revoked`` is refused always (OpenSSH: REVOKED HOST KEY DETECTED), never reported as
    unknown, and neither --trust-host-key nor --replace-host-key appends it."""
    from console.remote.host_keys import connect_with_trust

    ep = sim.server.endpoints["A"]
    real = asyncssh.read_private_key(str(sim.world.root / "keys" / "host_A_ed25519")).get_fingerprint("sha256")
    for line in (f"@revoked [127.0.0.1]:{ep.port} {_host_pub(sim)}",  # for this host
                 f"@revoked * {_host_pub(sim)}",  # for every host
                 # trusted for the host without a port, revoked for host:port (asyncssh's match() alone
                 # would accept it: it falls back to the no-port line and forgets the revocation)
                 f"127.0.0.1 {_host_pub(sim)}@revoked [127.0.0.1]:{ep.port} {_host_pub(sim)}"):
        kh = tmp_path / "known_hosts"
        kh.write_text(line)
        before = kh.read_text()
        t = transport_for(sim, known_hosts=str(kh))
        with pytest.raises(HostKeyError) as ei:
            await t.run("true")
        assert ei.value.revoked and "REVOKED" in str(ei.value) and "unknown" not in str(ei.value)
        for trust, replace in ((True, None), (False, real), (True, real)):
            with pytest.raises(HostKeyError, match="REVOKED"):
                await connect_with_trust(t, trust=trust, replace=replace, say=lambda _s: None)
        with pytest.raises(HostKeyError, match="REVOKED"):
            await t.trust_host_key(real)
        with pytest.raises(HostKeyError, match="REVOKED"):
            await t.replace_host_key(real)
        assert kh.read_text() == before
        await t.close()


async def test_the_changed_key_message_sends_the_operator_to_the_station_not_to_a_ready_command(sim, tmp_path):
    ep = sim.server.endpoints["A"]
    other = asyncssh.generate_private_key("ssh-ed25519").export_public_key("openssh").decode().strip()
    (tmp_path / "known_hosts").write_text(f"[127.0.0.1]:{ep.port} {other}\n")
    t = transport_for(sim, known_hosts=str(tmp_path / "known_hosts"))
    real = asyncssh.read_private_key(str(sim.world.root / "keys" / "host_A_ed25519")).get_fingerprint("sha256")
    with pytest.raises(HostKeyError, match="has CHANGED") as ei:
        await t.run("true")
    msg = str(ei.value)
    assert f"--replace-host-key {real}" not in msg and "--replace-host-key SHA256" not in msg
    assert "ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub" in msg and "run there" in msg
    await t.close()


async def test_a_cert_authority_line_is_understood_and_said(sim, tmp_path):
    """An @cert-authority line for the host: a station that offers no certificate it signed is refused as
    unknown, and the message says a CA is trusted for this host (not a silent "unknown")."""
    ca = asyncssh.generate_private_key("ssh-ed25519").export_public_key().decode()
    ep = sim.server.endpoints["A"]
    (tmp_path / "known_hosts").write_text(f"@cert-authority [127.0.0.1]:{ep.port} {ca}")
    t = transport_for(sim, known_hosts=str(tmp_path / "known_hosts"))
    with pytest.raises(HostKeyError, match="@cert-authority") as ei:
        await t.run("true")
    assert ei.value.kind == "unknown"
    await t.close()


async def test_a_5_mb_line_over_ssh_is_one_clipped_line_never_fragments(sim):
    """AsyncSSH hands back what fills its receive window as a "line", so a 5 MB
    line came as three lines (each diagnosed). One logical line is one line, clipped with its mark."""
    from console.remote.lines import STREAM_LINE_MAX

    t = transport_for(sim)
    big = 5_000_000
    cmd = (f"python3 -c \"import sys; sys.stdout.write('x' * {big} + '\\n' + 'after\\n')\"")
    try:
        lines = [line async for line in t.stream(cmd)]
    finally:
        await t.close()
    assert len(lines) == 2, [(len(line), line[-30:]) for line in lines]
    assert lines[0] == "x" * STREAM_LINE_MAX + f"… [+{big - STREAM_LINE_MAX:,} chars]"
    assert lines[1] == "after"
