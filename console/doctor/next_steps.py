"""The one table of next steps after a hang verdict: ``h``, ``hang-report``, ``doctor`` and the
dashboard's progress banner look a verdict's kind up here, so that the same situation ends in the same
words everywhere. Pure data and one lookup; no I/O; of the console, only the flight recorder's launch
settings (so that the hint names what the launch sets)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from console.remote.cmdlines.nccl import FLIGHT_RECORDER_ON, FLIGHT_RECORDER_ON_TEXT

Kind = Literal["out-of-step", "rank-gone", "stuck-collective", "network", "kernel", "moving", "idle", "no-ptrace",
               "fr-off", "nothing-running", "unknown", "wedged", "start-stuck"]

CAPTURE = "keep the evidence first: s in h (or `dgx-console hang-report PATH`) writes the archive"
RESTART = "restart the whole service, every station, not one: R on the dashboard (or `dgx-console restart`)"


@dataclass(frozen=True)
class NextStep:
    kind: Kind
    text: str  # one sentence: what to do, in order
    key: str | None = None  # the key to press on the dashboard, where one does it
    setting: str | None = None  # the launch setting to change, where that is the step
    brief: str = ""  # the same step in one line that fits an 80-column banner (<= 70), where a banner shows it


TABLE: dict[str, NextStep] = {
    "out-of-step": NextStep("out-of-step", f"1) {CAPTURE}; 2) read the log and stack of the rank(s) not with the "
                            f"others (the cause; the others only wait for them); 3) {RESTART}.", "R",
                            brief="h: who fell behind · s in h: keep evidence · R: restart every station"),
    "rank-gone": NextStep("rank-gone", f"1) {CAPTURE}; 2) read the gone rank's last log lines (d: the diagnosis) "
                          f"for what ended it (watchdog, OOM, Xid); 3) {RESTART}: the ranks left cannot serve.", "R",
                          brief="s in h: keep evidence · d: what ended it · R: restart every station"),
    "stuck-collective": NextStep("stuck-collective", f"1) {CAPTURE}; 2) {RESTART}; 3) if it comes back after hours "
                                 "of load: a newer image (NCCL), and n (the NCCL workbench) for a debug relaunch.",
                                 "R"),
    "network": NextStep("network", f"1) {CAPTURE}; 2) fix the path the counters name (k: link checks; MTU, GID index, "
                        f"the port or cable); 3) {RESTART}: a broken queue pair does not recover.", "k"),
    "kernel": NextStep("kernel", f"1) {CAPTURE}; 2) the kernel log names the fault (an Xid: NVIDIA's Xid catalog; a "
                       f"link down: the port or cable); 3) {RESTART} once it is fixed.", "k"),
    "moving": NextStep("moving", "not an NCCL hang (the operations advance): look at the serving side: c (a chat "
                       "test) and the API's queue; capture again (r) if requests still stall.", "c"),
    "idle": NextStep("idle", "not an NCCL hang (every engine process waits for work): look at the API and whatever "
                     "sends it requests: c (a chat test).", "c"),
    "no-ptrace": NextStep("no-ptrace", "py-spy cannot read the engine: launch with --cap-add SYS_PTRACE (or install "
                          "py-spy on the station) and capture again (r).", "r", "--cap-add SYS_PTRACE"),
    "fr-off": NextStep("fr-off", f"the flight recorder is off: launch with {FLIGHT_RECORDER_ON_TEXT} to see each "
                       "rank's last collective.", None, "TORCH_NCCL_TRACE_BUFFER_SIZE=" + FLIGHT_RECORDER_ON[
                           "TORCH_NCCL_TRACE_BUFFER_SIZE"]),
    "nothing-running": NextStep("nothing-running", "no engine runs: launch the service (L on the dashboard, or "
                                "`dgx-console launch`).", "L"),
    "wedged": NextStep("wedged", f"1) h: the hang evidence (each rank's stack and last collective) and {CAPTURE}; "
                       f"2) {RESTART}: a wedged engine does not recover on its own.", "h",
                       brief="h: where each rank waits · s in h: keep evidence · R: restart all"),
    "start-stuck": NextStep("start-stuck", "1) h: where each rank waits (py-spy, the flight recorder); 2) d: the "
                            "diagnosis of the start-up log; 3) stop (S), fix what they name, launch again (L).", "h",
                            brief="h: where each rank waits · d: start-up findings · then S, fix, L"),
    "unknown": NextStep("unknown", f"capture again in a minute (r in h) to see who moves; {CAPTURE}.", "r"),
}


#: the progress states that raise the dashboard's banner -> the kind of their next step
BANNER_KINDS: dict[str, str] = {"out-of-step": "out-of-step", "peer-down": "rank-gone", "wedged": "wedged",
                                "stuck": "start-stuck"}


def banner_step(progress_state: str) -> str:
    """The one line a banner ends on for a progress state ("next: ..."), "" for a state with none."""
    kind = BANNER_KINDS.get(progress_state)
    return f"next: {TABLE[kind].brief}" if kind else ""


def next_step(kind: str) -> NextStep:
    """The next step of a verdict ``kind`` (an unknown kind gets the "capture again" step)."""
    return TABLE.get(kind, TABLE["unknown"])
