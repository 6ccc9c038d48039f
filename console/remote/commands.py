"""Every remote command line in one place. Every argument that comes from config or the
operator goes through ``shlex.quote``; nothing else builds shell text."""

from __future__ import annotations

import shlex

from console.probes import docker as docker_probe
from console.probes import nvidia_smi as smi

q = shlex.quote


def gpu_query(loop_ms: int | None = None) -> str:
    """One line per GPU; with ``loop_ms`` one long-lived process prints a round per interval."""
    cmd = f"nvidia-smi {smi.GPU_QUERY} {smi.CSV_FORMAT}"
    if loop_ms:
        cmd = "exec " + cmd + f" -lms {int(loop_ms)}"
    return cmd


def compute_apps_query(loop_ms: int | None = None) -> str:
    cmd = f"nvidia-smi {smi.APPS_QUERY} {smi.CSV_FORMAT}"
    if loop_ms:
        cmd = "exec " + cmd + f" -lms {int(loop_ms)}"
    return cmd


# A bash loop made of builtins only (read from a never-written fd as the sleep), so monitoring
# host memory starts one process for its whole life instead of one per sample. The path is
# overridable through DGX_MEMINFO for the simulated stations; on a real station it is unset.
_MEMINFO_LOOP = (
    'exec 3<> <(:); f="${DGX_MEMINFO:-/proc/meminfo}"; '
    'while :; do while IFS= read -r l; do printf "%s\\n" "$l"; done < "$f"; '
    'printf "@@\\n"; read -t {secs} -u 3 _; done'
)


def meminfo_stream(interval_s: float = 2.0) -> str:
    return "exec bash -c " + q(_MEMINFO_LOOP.replace("{secs}", f"{interval_s:g}"))


def meminfo_once() -> str:
    return 'cat "${DGX_MEMINFO:-/proc/meminfo}"'


def docker_inspect(container: str) -> str:
    return f"docker inspect --format {q(docker_probe.INSPECT_FORMAT)} {q(container)}"


def docker_events(container: str) -> str:
    return (f"exec docker events --filter {q('container=' + container)} "
            f"--format {q(docker_probe.EVENTS_FORMAT)}")


def docker_logs(container: str, tail: int = 1000, follow: bool = True) -> str:
    parts = ["docker", "logs", "--timestamps", "--tail", str(int(tail))]
    if follow:
        parts.insert(2, "-f")
    return "exec " + " ".join(parts) + " " + q(container) + " 2>&1"


def docker_start(container: str) -> str:
    return f"docker start {q(container)}"


def docker_stop(container: str, timeout_s: int = 30) -> str:
    return f"docker stop -t {int(timeout_s)} {q(container)}"
