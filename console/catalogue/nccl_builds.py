"""NCCL builds known to hang, with the public reports that say so: the one table the pane and the
workbench flag a loaded NCCL against (``known_bad``). Stations of this console are Grace (aarch64:
GB10, GB300), so an ARM-only defect applies to every one of them."""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class KnownBadNccl:
    first: str  # first affected version (inclusive); "" = every version before ``fixed``
    fixed: str  # first version without the defect (exclusive end of the range)
    short: str  # the defect in a few words (a pane line)
    what: str  # the defect, as the report says it
    fix: str
    links: tuple[str, ...]  # the reports (issue, pull request, release note)

    def covers(self, version: str) -> bool:
        v = version_key(version)
        return (not self.first or v >= version_key(self.first)) and v < version_key(self.fixed)

    @property
    def cite(self) -> str:
        """``owner/repo#N`` of the first report (short enough for a pane line)."""
        m = re.match(r"https://github\.com/([^/]+/[^/]+)/(?:issues|pull)/(\d+)", self.links[0])
        return f"{m.group(1)}#{m.group(2)}" if m else self.links[0]


KNOWN_BAD_NCCL: tuple[KnownBadNccl, ...] = (
    KnownBadNccl("2.29.2", "2.29.3", "hangs", "hang regression of 2.29.2 (fixed in the 2.29.3 patch release)",
                 "NCCL 2.29.3 or later", ("https://github.com/pytorch/pytorch/pull/174338",)),
    KnownBadNccl("", "2.29.3", "silent wedge on ARM",
                 "silent collective wedge on ARM (proxy-op slots leak on a weak CAS failure): every rank at 100 % "
                 "util, no error, no timeout",
                 "an image with NCCL >= 2.29.3",
                 ("https://github.com/marin-community/marin/pull/8038",
                  "https://github.com/vllm-project/vllm/issues/40969")),
    KnownBadNccl("2.30.4", "2.30.5", "NVLS hang in MoE weight loading",
                 "NVLS code path hangs MoE expert weight loading (2.30.3 works)",
                 "NCCL_NVLS_ENABLE=0 on every station, or another NCCL build",
                 ("https://github.com/NVIDIA/nccl/issues/2167", "https://github.com/vllm-project/vllm/issues/40969")),
)


def version_key(version: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", version)[:3])


def known_bad(version: str | None) -> KnownBadNccl | None:
    """The first known defect of this NCCL version, or None."""
    if not version or not re.match(r"\d+\.\d+\.\d+", version):
        return None
    return next((k for k in KNOWN_BAD_NCCL if k.covers(version)), None)
