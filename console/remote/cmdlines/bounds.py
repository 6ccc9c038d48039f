"""How a remote tool that can wedge ends station-side: a one-shot under ``timeout -s KILL`` (an
``nvidia-smi`` one also behind a per-user lock), a loop under a shell that kills it when its channel
hangs up. Every nvidia-smi command line (``gpus.py``, ``streams.py``) is built through these."""

from __future__ import annotations

import shlex

q = shlex.quote


# A tool stuck in the GPU driver (NVML wedged) prints nothing and ignores a hangup: every nvidia-smi
# we start must end station-side whatever it does. A one-shot is killed after a limit (no PTY, so
# closing its channel would signal nothing); a loop is killed when its channel closes (a PTY hangup
# reaches the shell that owns it even when the tool ignores it). Retries never pile up processes.
TOOL_LIMIT_S = 10  # a one-shot nvidia-smi is killed (SIGKILL, station-side) after this


KILLED_STATUS = 137  # what ``timeout -s KILL`` exits with when it had to kill


# A process stuck in the driver (state D) survives SIGKILL: a one-shot nvidia-smi holds a per-user lock;
# the next waits SMI_LOCK_WAIT_S, else is not started and exits 137 (at most one stuck per station).
SMI_LOCK_WAIT_S = 3


SMI_LOCK = '"${XDG_RUNTIME_DIR:-/tmp}/dgx-console-nvidia-smi-$(id -u).lock"'


def bounded(cmd: str, limit_s: float = TOOL_LIMIT_S) -> str:
    """``cmd`` killed station-side after ``limit_s`` (exit 137), whatever signals it ignores; an
    ``nvidia-smi`` one-shot only while no earlier one is stuck (the lock above; no ``flock`` on the
    station: as before, unlocked)."""
    run = f"timeout -s KILL {max(1, int(limit_s))} {cmd}"
    if not cmd.startswith("nvidia-smi "):
        return run
    return (f"if command -v flock >/dev/null 2>&1; then flock -w {SMI_LOCK_WAIT_S} -E {KILLED_STATUS} "
            f"{SMI_LOCK} {run}; else {run}; fi")


def ended_with_channel(cmd: str) -> str:
    """A long-lived ``cmd`` that dies with its channel even if it ignores the hangup: a shell that
    owns it runs it in the background and kills it (SIGKILL) when the hangup reaches the shell."""
    script = f'{cmd} & p=$!; trap "kill -KILL $p 2>/dev/null; exit 129" HUP INT TERM; wait "$p"'
    return "exec sh -c " + q(script)
