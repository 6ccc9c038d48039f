"""A one-shot command's output is capped at the source: the console reads at most ``max_bytes`` of
each stream, ends the command, and the result says where it was cut."""

from __future__ import annotations

import pytest

from console.config import Station
from console.remote.bounded import DEFAULT_MAX_BYTES, cut_words, decoded
from console.remote.local import LocalTransport

STATION = Station(name="L", host="localhost", rank=0, local=True)


async def test_a_flood_is_cut_at_the_cap_and_the_command_ended():
    t = LocalTransport(STATION, command_timeout=30)
    res = await t.run("yes 0123456789abcdef", max_bytes=100_000)  # never ends by itself
    assert res.cut and res.stdout.endswith(cut_words(100_000) + "\n")
    assert len(res.stdout.encode()) < 100_000 + 200


async def test_stderr_is_capped_too_and_a_small_output_is_whole():
    t = LocalTransport(STATION, command_timeout=30)
    res = await t.run("echo done; head -c 50000 /dev/zero | tr '\\0' x >&2", max_bytes=1000)
    assert res.cut and res.stdout == "done\n" and cut_words(1000) in res.stderr
    res = await t.run("printf 'a\\nb\\n'; exit 3")
    assert (res.exit_status, res.stdout, res.cut) == (3, "a\nb\n", False)
    res = await t.run("cat", input="fed\n")
    assert res.stdout == "fed\n"


def test_the_default_and_a_cut_in_half_a_character():
    assert DEFAULT_MAX_BYTES == 8 * 1024 * 1024
    text = decoded("é".encode() * 3 + b"\xc3", True, 7)
    assert text.startswith("ééé\n[output cut at 7 bytes") and "\ufffd" not in text


@pytest.mark.parametrize("n", [0, 1, 65536, 65537])
async def test_exactly_at_the_cap_is_not_a_cut(n):
    t = LocalTransport(STATION, command_timeout=30)
    res = await t.run(f"head -c {n} /dev/zero", max_bytes=max(n, 1))
    assert not res.cut and len(res.stdout) == n
