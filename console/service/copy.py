"""``dgx-console copy``: a checkpoint directory or a container image from one station to another,
over the rail, resumable, then the identity of both sides compared.

The copy runs on the source station (its rsync pushes to the destination's ``rail_ip`` with the
source station's own key): the bytes cross the rail, never the management network nor this
machine. Before it starts: symlinks that dangle or point out of the directory are refused (the copy
would not be the checkpoint), and the destination's free space must hold what is still to send.
After it: file list, sizes and the sha256 of every file on both sides (an image: its id), each
difference named. A cut copy resumes where it stopped (rsync ``--partial --append-verify``; an
image's saved tar is kept on the source and copied the same way).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from enum import StrEnum

from console.config import Config, Station
from console.errors import UsageError
from console.probes import ParseError
from console.probes import disk as disk_probe
from console.probes.copy_manifest import Manifest, Progress, differences, parse_manifest, parse_progress
from console.remote import cmdlines as rc
from console.remote.results import CommandResult
from console.remote.session import make_transport
from console.remote.transport import Transport, TransportError
from console.sanitize import one_line
from console.tasks import gather_owned

IMAGE_CACHE = "~/.cache/dgx-console/copy"  # where an image's saved tar waits (source and destination)
HASH_BYTES_S = 300e6  # the slowest sha256 pace we allow for (the identity check's time limit)
IMAGE_LOAD_FACTOR = 2.0  # the destination holds the tar and the loaded layers at once


class CopyKind(StrEnum):
    CHECKPOINT = "checkpoint"
    IMAGE = "image"


class CopyResultKind(StrEnum):
    PLANNED = "planned"  # --dry-run: nothing copied
    OK = "ok"  # copied (or already there) and the same on both sides
    REFUSED = "refused"  # not started: a bad symlink, not enough space, nothing to copy
    FAILED = "failed"  # started and did not finish (resume by running it again)
    MISMATCH = "mismatch"  # finished, but the two sides differ


@dataclass
class CopyPlan:
    kind: CopyKind
    source: str
    destination: str
    rail_ip: str
    source_path: str = ""  # the checkpoint's directory, or the image's staging folder
    destination_path: str = ""
    image: str = ""
    image_id: str = ""
    destination_image_id: str = ""
    files: int = 0
    total_bytes: int = 0
    present_bytes: int = 0  # already at the destination (a resumed copy sends only the rest)
    destination_free_bytes: int | None = None
    destination_mount: str = ""
    refused: list[str] = field(default_factory=list)

    @property
    def to_send_bytes(self) -> int:
        return max(0, self.total_bytes - self.present_bytes)

    @property
    def needed_bytes(self) -> int:
        factor = IMAGE_LOAD_FACTOR if self.kind == CopyKind.IMAGE else 1.0
        return int(self.to_send_bytes * factor)

    def lines(self) -> list[str]:
        what = f"image {self.image} ({self.image_id[:19]})" if self.kind == CopyKind.IMAGE else self.source_path
        out = [f"copy {self.kind} {what}", f"  from {self.source} to {self.destination} over the rail "
                                            f"({self.rail_ip}), with rsync --partial --append-verify"]
        if self.kind == CopyKind.CHECKPOINT:
            out.append(f"  into {self.destination_path} on {self.destination}")
        out.append(f"  {self.files} file(s), {gb(self.total_bytes)}; already there {gb(self.present_bytes)}; "
                   f"to send {gb(self.to_send_bytes)}")
        if self.destination_free_bytes is not None:
            out.append(f"  {gb(self.destination_free_bytes)} free on {self.destination}:{self.destination_mount} "
                       f"(needs {gb(self.needed_bytes)})")
        out.append("  then: file list, sizes and sha256 of every file compared on both sides"
                   if self.kind == CopyKind.CHECKPOINT else "  then: docker load there, image ids compared")
        out += [f"  refused: {r}" for r in self.refused]
        return out


@dataclass
class CopyResult:
    plan: CopyPlan
    result: CopyResultKind
    seconds: float = 0.0
    bytes_sent: int = 0
    differences: list[str] = field(default_factory=list)
    detail: str = ""

    @property
    def rate_bytes_s(self) -> float | None:
        return self.bytes_sent / self.seconds if self.seconds > 0 and self.bytes_sent else None

    def to_json(self) -> dict:
        p = asdict(self.plan)
        p.update(kind=str(self.plan.kind), to_send_bytes=self.plan.to_send_bytes, needed_bytes=self.plan.needed_bytes)
        rate = self.rate_bytes_s
        return {**p, "result": str(self.result), "seconds": round(self.seconds, 3), "bytes_sent": self.bytes_sent,
                "rate_mb_s": None if rate is None else round(rate / 1e6, 1), "differences": self.differences,
                "detail": self.detail}


def gb(n: int | float) -> str:
    return f"{n / 1e9:,.2f} GB" if n >= 1e8 else f"{n / 1e6:,.1f} MB"


def _stations(cfg: Config, source: str | None, destination: str | None) -> tuple[Station, Station]:
    try:
        src = cfg.station(source) if source else cfg.head
        others = [s for s in cfg.stations if s.name != src.name]
        dst = cfg.station(destination) if destination else (others[0] if len(others) == 1 else None)
    except Exception as exc:  # ConfigError: no such station
        raise UsageError(one_line(str(exc), 200)) from None
    if dst is None:
        raise UsageError(f"--to: name the destination station ({', '.join(s.name for s in others)})")
    if dst.name == src.name:
        raise UsageError(f"--from and --to are both {src.name}: a copy needs two stations")
    if not dst.rail_ip:
        raise UsageError(f"station {dst.name} has no rail_ip in the config: the copy goes over the rail, "
                         "never the management network")
    return src, dst


def check_path(path: str, flag: str) -> str:
    """A station path: absolute or ``~/...``, no newline, no ``..`` (one line, exit 2 otherwise)."""
    if not path or not (path.startswith("/") or path.startswith("~/")) or "\n" in path or "\0" in path:
        raise UsageError(f"{flag} must be an absolute path or ~/..., got {one_line(repr(path), 100)}")
    if ".." in path.split("/") or path.rstrip("/") in ("", "~"):
        raise UsageError(f"{flag} may not be / or ~ or contain '..', got {one_line(repr(path), 100)}")
    return path.rstrip("/")


async def _run(t: Transport, cmd: str, timeout: float) -> str:
    r = await t.run(cmd, timeout=timeout)
    if not r.ok:
        raise TransportError(one_line(r.stderr or r.stdout, 300) or f"exit {r.exit_status}")
    return r.stdout


async def _free(t: Transport, plan: CopyPlan, path: str, timeout: float) -> None:
    try:
        df = disk_probe.parse_df(await _run(t, rc.copy.peer(plan.rail_ip, rc.disk_free(path)), timeout))
    except (ParseError, TransportError) as exc:
        plan.refused.append(f"free space on {plan.destination} not read: {exc}")
        return
    plan.destination_free_bytes, plan.destination_mount = df.avail_bytes, df.mount
    if df.avail_bytes < plan.needed_bytes:
        plan.refused.append(f"not enough space on {plan.destination}:{df.mount}: {gb(df.avail_bytes)} free, "
                            f"{gb(plan.needed_bytes)} needed")


def _unread(plan: CopyPlan, source_ok: bool, why: str) -> str:
    where = (f"{plan.destination} not reached over the rail ({plan.rail_ip}) from {plan.source}" if source_ok
             else f"{plan.source_path} not read on {plan.source}")
    return f"{where}: {one_line(why, 200) or 'no reason given'}"


def _rsync_refusal(plan: CopyPlan, tools: CommandResult, source: str, destination: str) -> str | None:
    """Why the resumable transfer cannot run (peer not reached over the rail, or rsync missing on a side)."""
    if tools.exit_status != 255 and "no-rsync" not in tools.stdout:
        return None
    where = source if "no-rsync-here" in tools.stdout else destination
    return (_unread(plan, True, tools.stderr) if tools.exit_status == 255 else
            f"no rsync on {where} (the copy's resumable transfer): install it there (apt install rsync)")


def _link_refusals(manifest: Manifest) -> list[str]:
    """A bad symlink refuses the copy: what arrives would not be the checkpoint."""
    return [f"symlink {name} {'points nowhere' if k == 'dangling' else 'points out of the directory'}"
            for k, name in manifest.bad_links]


def _present_bytes(source: Manifest, destination: Manifest) -> int:
    """Bytes already in place: a file of the same name, up to its size (a cut file counts what it has)."""
    return sum(min(size, destination.sizes.get(name, 0)) for name, size in source.sizes.items())


async def _plan_checkpoint(t: Transport, plan: CopyPlan, dest_path: str | None, limit: float) -> None:
    """Both sides' file lists (sizes only) and the destination's free space; refusals go on the plan."""
    plan.destination_path = check_path(dest_path, "--dest") if dest_path else plan.source_path
    mine, theirs = await gather_owned(t.run(rc.copy.manifest(plan.source_path, False), timeout=limit),
                                        t.run(rc.copy.peer_manifest(plan.rail_ip, plan.destination_path, False),
                                              timeout=limit))
    if not mine.ok or not theirs.ok:
        plan.refused.append(_unread(plan, mine.ok, mine.stderr or theirs.stderr))
        return
    sm, dm = parse_manifest(mine.stdout), parse_manifest(theirs.stdout)
    if not sm.present:
        plan.refused.append(f"no directory {plan.source_path} on {plan.source}")
        return
    plan.refused += _link_refusals(sm)
    plan.files, plan.total_bytes = len(sm.sizes), sm.total_bytes
    plan.present_bytes = _present_bytes(sm, dm)
    await _free(t, plan, plan.destination_path, limit)


def _check_image(image: str) -> str:
    """An image name is one word: it goes into the stations' command lines."""
    if not image or any(c.isspace() for c in image):
        raise UsageError(f"IMAGE must be an image name, got {one_line(repr(image), 100)}")
    return image


def _image_id_size(stdout: str) -> tuple[str, int]:
    """The source's ``<id> <bytes>`` line; a missing or unreadable size counts as 0."""
    words = stdout.split()
    image_id = words[0] if words else ""
    return image_id, int(words[1]) if len(words) > 1 and words[1].isdigit() else 0


async def _plan_image(t: Transport, plan: CopyPlan, image: str, limit: float) -> None:
    """The image's id and size on both sides and, when bytes are still to send, the free space there."""
    plan.image = _check_image(image)
    ids = await gather_owned(t.run(rc.copy.image_id_size(plan.image), timeout=limit),
                               t.run(rc.copy.peer_image_id(plan.rail_ip, plan.image), timeout=limit))
    if not ids[0].ok:
        plan.refused.append(f"no image {plan.image} on {plan.source}: {one_line(ids[0].stderr, 200)}")
        return
    if not ids[1].ok and ids[1].exit_status == 255:  # ssh's own failure: the peer is not reached
        plan.refused.append(_unread(plan, True, ids[1].stderr))
        return
    plan.image_id, plan.total_bytes = _image_id_size(ids[0].stdout)
    plan.files = 1
    plan.destination_image_id = ids[1].stdout.strip() if ids[1].ok else ""
    if plan.destination_image_id == plan.image_id:
        plan.present_bytes = plan.total_bytes
    plan.source_path = plan.destination_path = f"{IMAGE_CACHE}/{plan.image_id.removeprefix('sha256:')[:16]}"
    if plan.to_send_bytes:
        await _free(t, plan, plan.destination_path, limit)


async def plan_copy(cfg: Config, kind: CopyKind, what: str | None, source: str | None = None,
                    destination: str | None = None, dest_path: str | None = None,
                    transport: Transport | None = None) -> tuple[CopyPlan, Transport]:
    """What the copy will do, read from both stations (sizes only, no hashing); refusals listed."""
    src, dst = _stations(cfg, source, destination)
    t = transport or make_transport(src, cfg.connect_timeout_s, cfg.command_timeout_s)
    plan = CopyPlan(kind, src.name, dst.name, dst.rail_ip)
    limit = cfg.command_timeout_s
    tools = await t.run(rc.copy.rsync_present(plan.rail_ip), timeout=limit)
    refusal = _rsync_refusal(plan, tools, src.name, dst.name)
    if refusal is not None:
        plan.refused.append(refusal)
    if kind == CopyKind.CHECKPOINT:  # checked and named in the plan even when the copy is refused
        plan.source_path = check_path(what or cfg.profile.model_dir, "PATH")
    if refusal is not None:
        return plan, t
    if kind == CopyKind.CHECKPOINT:
        await _plan_checkpoint(t, plan, dest_path, limit)
    else:
        await _plan_image(t, plan, what or cfg.profile.image, limit)
    return plan, t


async def _identity(t: Transport, plan: CopyPlan) -> list[str]:
    limit = max(60.0, plan.total_bytes / HASH_BYTES_S)
    mine, theirs = await gather_owned(_run(t, rc.copy.manifest(plan.source_path, True), limit),
                                        _run(t, rc.copy.peer_manifest(plan.rail_ip, plan.destination_path, True), limit))
    sm, dm = parse_manifest(mine), parse_manifest(theirs)
    if not dm.present:
        return [f"no directory {plan.destination_path} on {plan.destination}"]
    return differences(sm, dm)


async def _push(t: Transport, plan: CopyPlan, bwlimit_mbps: int | None,
                on_progress: Callable[[Progress], None] | None) -> tuple[int, str]:
    """rsync's run: (its exit status, its last lines that are not progress)."""
    status, tail = 255, []
    async for line in t.stream(rc.copy.rsync_push(plan.source_path, plan.rail_ip, plan.destination_path, bwlimit_mbps)):
        line = line.rstrip("\r\n")
        if line.startswith(rc.copy.EXIT_MARK):
            status = int(line.split()[-1]) if line.split()[-1].isdigit() else 255
        elif (p := parse_progress(line)) is not None:
            if on_progress:
                on_progress(p)
        elif line.strip():
            tail = (tail + [line.strip()])[-3:]
    return status, "; ".join(tail)


async def run_copy(plan: CopyPlan, t: Transport, bwlimit_mbps: int | None = None,
                   on_progress: Callable[[Progress], None] | None = None) -> CopyResult:
    """The copy the plan describes (refused plans are not started), then the identity check."""
    if plan.refused:
        return CopyResult(plan, CopyResultKind.REFUSED, detail="; ".join(plan.refused))
    started = time.monotonic()
    if plan.kind == CopyKind.IMAGE and plan.destination_image_id == plan.image_id:
        return CopyResult(plan, CopyResultKind.OK, detail=f"already on {plan.destination}: {plan.image_id}")
    try:
        if plan.kind == CopyKind.IMAGE:
            await _run(t, rc.copy.image_save(plan.image, plan.source_path), max(600.0, plan.total_bytes / 100e6))
        status, tail = await _push(t, plan, bwlimit_mbps, on_progress)
        seconds = time.monotonic() - started
        if status != 0:
            return CopyResult(plan, CopyResultKind.FAILED, seconds,
                              detail=f"rsync exit {status}: {one_line(tail, 300)} (run it again to resume)")
        if plan.kind == CopyKind.IMAGE:
            await _run(t, rc.copy.peer_image_load(plan.rail_ip, plan.destination_path), max(600.0, plan.total_bytes / 100e6))
            seconds = time.monotonic() - started
            there = (await t.run(rc.copy.peer_image_id(plan.rail_ip, plan.image), timeout=60)).stdout.strip()
            await t.run(rc.copy.remove_tree(plan.source_path), timeout=60)
            diffs = [] if there == plan.image_id else [f"image id differs: {plan.image_id} vs {there or 'none'}"]
        else:
            diffs = await _identity(t, plan)
    except TransportError as exc:
        return CopyResult(plan, CopyResultKind.FAILED, time.monotonic() - started,
                          detail=one_line(str(exc), 300) + " (run it again to resume)")
    if not diffs:
        detail = ("same files, sizes and sha256 on both sides" if plan.kind == CopyKind.CHECKPOINT
                  else f"same image id on both sides: {plan.image_id}")
    elif plan.kind == CopyKind.CHECKPOINT:  # a resumed copy appends: it never rewrites a file as long as the source's
        detail = f"identity differs: remove those files on {plan.destination} and copy again"
    else:
        detail = f"identity differs: the image loaded on {plan.destination} is not the source's"
    kind = CopyResultKind.MISMATCH if diffs else CopyResultKind.OK
    return CopyResult(plan, kind, seconds, plan.to_send_bytes, diffs, detail)
