"""The workbench's test buffers on unified memory (GB10): what ``all_reduce_perf`` may allocate, from
the stations' MemAvailable now. On a GB10 the GPU's buffers are host memory; a test that takes the
box under its floor can lock it up until a power cycle, so the largest size (``-e``) is the biggest
power of two whose send and receive buffers, with NCCL's own allocations beside them, leave the
floor (``[ui] memory_floor_mib``) free on every station; a station without that room is not tested.
Discrete GPUs keep the full sweep (their buffers are GPU memory)."""

from __future__ import annotations

from dataclasses import dataclass

from console.config import Config
from console.probes import ParseError
from console.probes.meminfo import parse_meminfo
from console.remote import cmdlines as rc
from console.station.checks import StationDown, ToolMissing
from console.tasks import gather_owned

FULL_MAX_BYTES = 1 << 30  # the sweep's largest size on discrete GPUs (-e 1G)
MIN_MAX_BYTES = 8 << 20  # below this the bandwidth figure says nothing: the test is not run
NCCL_OVERHEAD_MIB = 1536  # NCCL's own buffers, the CUDA context and MPI beside the test's two buffers
UNREAD_MAX_BYTES = 256 << 20  # MemAvailable not read on a unified-memory station: a small, safe sweep


@dataclass(frozen=True)
class BufferCap:
    max_bytes: int | None  # None: not run (no room over the floor)
    why: str  # "" on discrete GPUs

    @property
    def arg(self) -> str:
        """``-e``'s value: "1G", "256M"."""
        n = self.max_bytes or 0
        return f"{n >> 30}G" if n >= 1 << 30 and n % (1 << 30) == 0 else f"{n >> 20}M"


def nccl_cap(available_mib: dict[str, int | None], floor_mib: int, unified: bool) -> BufferCap:
    """The sweep's largest size from each station's MemAvailable (MiB; None: not read)."""
    if not unified:
        return BufferCap(FULL_MAX_BYTES, "")
    unread = [n for n, a in available_mib.items() if a is None]
    read = {n: a for n, a in available_mib.items() if a is not None}
    if not read:
        return BufferCap(UNREAD_MAX_BYTES, f"MemAvailable not read on {', '.join(unread)}: buffers capped at "
                                           f"{UNREAD_MAX_BYTES >> 20} MiB (unified memory)")
    name, avail = min(read.items(), key=lambda kv: kv[1])
    budget_mib = (avail - floor_mib - NCCL_OVERHEAD_MIB) / 2  # a send and a receive buffer
    size = FULL_MAX_BYTES
    while size > MIN_MAX_BYTES and size > budget_mib * (1 << 20):
        size >>= 1
    if size > budget_mib * (1 << 20):
        return BufferCap(None, f"not run: {name}'s MemAvailable is {avail / 1024:.1f} GiB, no room for test buffers "
                               f"over the floor {floor_mib / 1024:.1f} GiB (unified memory: the box could lock up)")
    if unread:
        size = min(size, UNREAD_MAX_BYTES)
    words = f"largest buffer {size >> 20} MiB, sized by {name}'s MemAvailable {avail / 1024:.1f} GiB (floor " \
            f"{floor_mib / 1024:.1f} GiB, unified memory)"
    return BufferCap(size, words + (f"; MemAvailable not read on {', '.join(unread)}" if unread else ""))


async def read_available(run, config: Config) -> dict[str, int | None]:
    """Each station's MemAvailable now (None where it could not be read); ``run(station, cmd)``."""
    async def one(name: str) -> int | None:
        try:
            res = await run(name, rc.meminfo_once())
            return parse_meminfo(res.stdout).available_mib if res.ok else None
        except (ParseError, StationDown, ToolMissing):  # unread is a state here, said by the cap
            return None

    names = [s.name for s in config.stations]
    got = await gather_owned(*(one(n) for n in names))
    return dict(zip(names, got, strict=True))
