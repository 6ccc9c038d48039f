"""``dgx-console copy`` through real sshd: A's rsync pushes to B's rail address with A's own key (the
console never carries the bytes); a cut copy resumes; a file changed on one side is named; bad
symlinks and a destination too small are refused before anything is sent; --dry-run sends nothing."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from console.service.copy import CopyKind, CopyResultKind, plan_copy, run_copy
from tests.waiting import until


def _tree(lab, station: str, sub: str = "copytest") -> tuple[str, Path]:
    """(the path as the console names it, where it lies in the station's tree)."""
    md = lab.config().profile.model_dir
    return f"{md}/{sub}", lab.world.fs_dir(station) / md.lstrip("/") / sub


def _checkpoint(lab, sizes: dict[str, int]) -> tuple[str, Path, Path]:
    path, src = _tree(lab, "A")
    for name, size in sizes.items():
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        (src / name).write_bytes(os.urandom(size))
    return path, src, _tree(lab, "B")[1]


def _cli(lab, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "console", "--config", str(lab.config_path()), "copy", *args],
                          capture_output=True, text=True, timeout=120)


def test_copy_dry_run_then_copy_and_identity_over_the_rail(lab):
    path, src, dst = _checkpoint(lab, {"model-00001.safetensors": 3_000_000, "sub/config.json": 1000})
    dry = _cli(lab, "checkpoint", path, "--dry-run", "--json")
    plan = json.loads(dry.stdout)
    assert dry.returncode == 0 and plan["result"] == "planned", dry.stderr
    assert plan["rail_ip"] == lab.rail["B"] and plan["files"] == 2 and plan["to_send_bytes"] == 3_001_000
    assert plan["destination_free_bytes"] > plan["needed_bytes"]
    assert not dst.exists()  # the plan sent nothing
    done = _cli(lab, "checkpoint", path, "--json")
    out = json.loads(done.stdout)
    assert done.returncode == 0 and out["result"] == "ok" and out["differences"] == [], done.stdout + done.stderr
    assert (dst / "sub/config.json").read_bytes() == (src / "sub/config.json").read_bytes()
    assert (dst / "model-00001.safetensors").read_bytes() == (src / "model-00001.safetensors").read_bytes()
    again = json.loads(_cli(lab, "checkpoint", path, "--json").stdout)
    assert again["present_bytes"] == again["total_bytes"] and again["to_send_bytes"] == 0


def test_a_file_changed_on_the_destination_is_named(lab):
    path, src, dst = _checkpoint(lab, {"model-00001.safetensors": 1_000_000, "model-00002.safetensors": 1_000_000})
    assert _cli(lab, "checkpoint", path).returncode == 0
    shard = dst / "model-00002.safetensors"
    st = shard.stat()
    data = bytearray(shard.read_bytes())
    data[500_000] ^= 0xFF  # one bit rot, same size and time: rsync's quick check cannot see it
    shard.write_bytes(bytes(data))
    os.utime(shard, ns=(st.st_atime_ns, st.st_mtime_ns))
    r = _cli(lab, "checkpoint", path, "--json")
    out = json.loads(r.stdout)
    assert r.returncode == 1 and out["result"] == "mismatch"
    assert out["differences"] == ["sha256 differs: model-00002.safetensors"]


def test_bad_symlinks_and_a_full_destination_are_refused_before_anything_is_sent(lab):
    path, src, dst = _checkpoint(lab, {"model-00001.safetensors": 1000})
    (src / "gone").symlink_to("no-such-file")
    (src / "outside").symlink_to("/etc/hostname")
    (src / "inside").symlink_to("model-00001.safetensors")  # fine: it stays in the directory
    r = _cli(lab, "checkpoint", path, "--json")
    out = json.loads(r.stdout)
    assert r.returncode == 1 and out["result"] == "refused"
    assert sorted(out["refused"]) == ["symlink gone points nowhere", "symlink outside points out of the directory"]
    assert not dst.exists()
    for link in ("gone", "outside"):
        (src / link).unlink()
    with open(src / "huge.safetensors", "wb") as fh:  # sparse: 8 TB that no disk of the lab has free
        fh.truncate(8 * 10**12)
    r = _cli(lab, "checkpoint", path)
    assert r.returncode == 1 and "not enough space on B" in r.stdout and "8,000.00 GB needed" in r.stdout
    assert not dst.exists()


def test_bad_input_is_exit_2(lab):
    path, _src, _dst = _checkpoint(lab, {"a": 10})
    for args in (("checkpoint", "relative/path"), ("checkpoint", path, "--to", "A"),
                 ("checkpoint", path, "--to", "C"), ("checkpoint", path + "/../x"), ("checkpoint", path, "--bwlimit", "0")):
        r = _cli(lab, *args)
        assert r.returncode == 2 and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr, (args, r.stderr)


def _receivers(lab) -> list[int]:
    """The rsync processes of the copy on B (the receiving end)."""
    pids = subprocess.run(["ip", "netns", "pids", lab.ns["B"]], capture_output=True, text=True).stdout.split()
    out = []
    for pid in pids:
        try:
            if b"rsync" in Path(f"/proc/{pid}/cmdline").read_bytes():
                out.append(int(pid))
        except OSError:
            pass
    return out


async def test_a_cut_copy_resumes_where_it_stopped(lab):
    size = 60_000_000
    path, _src, dst = _checkpoint(lab, {"model-00001.safetensors": size})
    cfg = lab.config()
    plan, t = await plan_copy(cfg, CopyKind.CHECKPOINT, path)
    task = asyncio.create_task(run_copy(plan, t, bwlimit_mbps=80))  # 10 MB/s: ~6 s, time to cut it

    def partial() -> int:  # --append-verify writes into the file itself, from its end
        shard = dst / "model-00001.safetensors"
        return shard.stat().st_size if shard.exists() else 0

    await until(lambda: partial() > 5_000_000, what="the first bytes on B", timeout=30)
    for pid in _receivers(lab):  # the destination's end dies mid-file: a cut
        os.kill(pid, signal.SIGKILL)
    first = await asyncio.wait_for(task, 60)
    await t.close()
    assert first.result == CopyResultKind.FAILED and "run it again to resume" in first.detail
    plan2, t2 = await plan_copy(cfg, CopyKind.CHECKPOINT, path)
    try:
        kept = plan2.present_bytes
        assert 5_000_000 <= kept < size  # the cut file was kept (--partial): only the rest is sent
        second = await run_copy(plan2, t2)
    finally:
        await t2.close()
    assert second.result == CopyResultKind.OK and second.differences == [] and second.bytes_sent == size - kept


def test_an_image_goes_over_the_rail_and_loads_with_the_same_id(lab):
    ref = "nvcr.io/nvidia/vllm:copy-test"
    with lab.world.edit("A") as st:  # an image only A has pulled
        st.setdefault("pulled", {})[ref] = 1234.5
    dry = json.loads(_cli(lab, "image", ref, "--dry-run", "--json").stdout)
    assert dry["result"] == "planned" and dry["destination_image_id"] == "" and dry["to_send_bytes"] > 0
    r = _cli(lab, "image", ref, "--json")
    out = json.loads(r.stdout)
    assert r.returncode == 0 and out["result"] == "ok", r.stdout + r.stderr
    assert out["detail"] == f"same image id on both sides: {dry['image_id']}"
    assert ref in lab.world.state("B")["pulled"]  # docker load ran on B
    for name in ("A", "B"):  # the staged tar is gone from both stations
        staged = list(lab.world.fs_dir(name).rglob("image.tar"))
        assert staged == [], staged
    again = json.loads(_cli(lab, "image", ref, "--json").stdout)
    assert again["result"] == "ok" and again["to_send_bytes"] == 0 and "already on B" in again["detail"]


async def test_a_rail_cut_mid_copy_ends_it_within_seconds_and_it_resumes_once_back(lab):
    """The rail goes down under a running copy (no FIN, no RST): the peer login's keepalive ends it
    (no copy hangs on a dead link), the bytes that arrived stay, and the next run sends the rest."""
    size = 60_000_000
    path, _src, dst = _checkpoint(lab, {"model-00001.safetensors": size})
    cfg = lab.config()
    plan, t = await plan_copy(cfg, CopyKind.CHECKPOINT, path)
    task = asyncio.create_task(run_copy(plan, t, bwlimit_mbps=80))
    shard = dst / "model-00001.safetensors"
    await until(lambda: shard.exists() and shard.stat().st_size > 5_000_000, what="the first bytes on B", timeout=30)
    lab.rail_down("B")
    loop = asyncio.get_running_loop()
    cut_at = loop.time()
    first = await asyncio.wait_for(task, 60)
    ended_after = loop.time() - cut_at
    await t.close()
    assert first.result == CopyResultKind.FAILED and ended_after < 40, (first.detail, ended_after)
    lab.rail_up("B")
    plan2, t2 = await plan_copy(cfg, CopyKind.CHECKPOINT, path)
    try:
        assert 5_000_000 <= plan2.present_bytes < size and not plan2.refused, plan2.refused
        second = await run_copy(plan2, t2)
    finally:
        await t2.close()
    assert second.result == CopyResultKind.OK and second.differences == []
