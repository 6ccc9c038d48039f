"""Several command lines run as one (re-exported by ``console.remote.cmdlines``, their one home).

A counter sample reads every rail's RDMA and NIC counters and the GPUs' activity: five short tools on
a two-rail station, twice per hang capture. Each command is one SSH channel and one process start-up
(on the simulator one Python interpreter each, the bulk of a capture's time), so the sample runs them
in one shell instead: each part's output between two marker lines, its own exit status in the second.
Every part keeps its own answer: a part whose closing marker never came (the whole command was cut)
is not read, never an empty success, and a part's exit status is its own (127: that tool is missing).

``at_once`` is the same answer with the parts started together (each part's output to a file of its
own in a private temporary directory, printed in order once all have ended): one round trip whose
wall time is its slowest part's, not the sum of them. The hang capture reads each station's counters
and GPUs that way, twice, so that both reads of every source are the same moment.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

PART_MARK = "@@dgx-part"
_END = re.compile(rf"\n{PART_MARK}-end (\d+) (\d+)\n")


@dataclass(frozen=True)
class PartResult:
    """One part's answer: its exit status and its standard output (its stderr is not kept)."""

    exit_status: int
    stdout: str


def in_one(cmds: Sequence[str]) -> str:
    """``cmds`` one after the other in one shell, each in a subshell of its own (an ``exit`` in one
    ends that part only), its output fenced and followed by its status."""
    return "; ".join(f"printf '{PART_MARK} {i}\\n'; ( {cmd} ) 2>/dev/null; "
                     f"printf '\\n{PART_MARK}-end {i} %d\\n' \"$?\"" for i, cmd in enumerate(cmds))


def at_once(cmds: Sequence[str]) -> str:
    """``cmds`` started together, each in a background subshell of its own, its output (stderr
    discarded, as ``in_one``) and exit status kept in a private temporary directory (removed when the
    line ends, cut or not); once every part has ended, each is printed as ``in_one`` prints it (read
    with ``split_parts``). A part whose status was never written (the line was cut) is not read."""
    start = " ".join(f'( ( {cmd} ) >"$d/{i}" 2>/dev/null; echo "$?" >"$d/{i}.rc" ) &' for i, cmd in enumerate(cmds))
    show = "; ".join(f"printf '{PART_MARK} {i}\\n'; cat \"$d/{i}\" 2>/dev/null; "
                     f"[ -s \"$d/{i}.rc\" ] && printf '\\n{PART_MARK}-end {i} %d\\n' \"$(cat \"$d/{i}.rc\")\""
                     for i in range(len(cmds)))
    return (f"d=$(mktemp -d 2>/dev/null) || exit 125; trap 'rm -rf \"$d\"' EXIT; trap 'exit 143' HUP INT TERM; trap 'exit 141' PIPE; "
            f"{start} wait; {show}")


def split_parts(text: str, n: int) -> list[PartResult | None]:
    """The ``n`` parts of ``in_one``'s output, in order; None for a part that did not finish."""
    out: list[PartResult | None] = [None] * n
    for i in range(n):
        start = text.find(f"{PART_MARK} {i}\n")
        if start < 0:
            continue
        body = start + len(f"{PART_MARK} {i}\n")
        for m in _END.finditer(text, body):
            if int(m.group(1)) == i:
                out[i] = PartResult(int(m.group(2)), text[body:m.start()])
                break
    return out
