"""The station host's command lines: paths in the login user's home, files, the clock, processes by
pid, the kernel log, the checkpoint's files and free space, the operator's own launch script, the page
cache, logind (whether a user lingers), and who listens on a port."""

from __future__ import annotations

import shlex

q = shlex.quote


MEMINFO = "/proc/meminfo"


def meminfo_once() -> str:
    return f"cat {MEMINFO}"


def station_path(path: str) -> str:
    """A shell word for ``path`` on the station (``~/x`` -> the login user's home)."""
    if path == "~" or path.startswith("~/"):
        rest = path[2:]
        return '"$HOME"' + (("/" + q(rest)) if rest else "")
    return q(path)


def whoami() -> str:
    return "id -un"


def clock_sync() -> str:
    return "chronyc tracking 2>/dev/null || timedatectl show -p NTPSynchronized --value"


def epoch() -> str:
    return "date +%s.%N"


def model_config(model_dir: str) -> str:
    return f"cat {station_path(model_dir.rstrip('/') + '/config.json')}"


def model_revision(model_dir: str) -> str:
    """Digests of the small files that pin a revision, plus every shard's size."""
    return (f"cd {station_path(model_dir)} && sha256sum config.json model.safetensors.index.json; "
            "find . -maxdepth 1 -name '*.safetensors' -printf '%s %f\\n' | sort -k2")


def disk_free(path: str) -> str:
    """Free space where the checkpoint lives (its parent when it is not there yet)."""
    return (f"d={station_path(path)}; while [ ! -d \"$d\" ] && [ \"$d\" != / ]; do d=$(dirname \"$d\"); done; "
            "df -B1 --output=target,size,avail \"$d\"")


def read_file(path: str) -> str:
    return f"cat {station_path(path)}"


def kill_pid(pid: int) -> str:
    return f"kill {int(pid)} 2>/dev/null; sleep 0.2; kill -9 {int(pid)} 2>/dev/null; true"


def pid_alive(pid: int) -> str:
    return f"kill -0 {int(pid)} 2>/dev/null && echo alive || echo gone"


def kernel_log_since(epoch: float) -> str:
    """The kernel log since ``epoch``: journald when readable, else the ring buffer (dmesg has no
    --since: the caller drops older dated lines)."""
    return (f"journalctl -k --no-pager -o short-iso --since @{int(epoch)} 2>&1 || "
            "dmesg --time-format iso 2>&1 || dmesg 2>&1")


def script_info(path: str) -> str:
    """Size, sha256 and text of a launch script on the station (the preview shows them)."""
    return f'f={station_path(path)}; wc -c < "$f" && sha256sum < "$f" | cut -d" " -f1 && cat "$f"'


def run_launch_script(path: str, log_path: str) -> str:
    """Start the script detached from this SSH channel (its output to ``log_path``) from the login
    user's home, as an operator would; print its pid."""
    log = station_path(log_path)
    return (f'mkdir -p "$(dirname {log})" && cd "$HOME" && '
            f'(nohup bash {station_path(path)} > {log} 2>&1 < /dev/null & echo $!)')


def tail_file(path: str, lines: int = 20) -> str:
    return f"tail -n {int(lines)} {station_path(path)}"


def drop_caches() -> str:
    """Flush dirty pages, then drop the page cache (root, else passwordless sudo): on unified
    memory (GB10) the cache counts as used for the engine's free-memory check."""
    return ("sync && { sysctl -q -w vm.drop_caches=3 2>/dev/null || sudo -n sysctl -q -w vm.drop_caches=3; } "
            "&& echo dropped")


LOGIND_CONF = "/etc/systemd/logind.conf"


def loginctl_user(user: str) -> str:
    """Whether ``user`` lingers (its IPC objects then outlive the SSH session)."""
    return f"loginctl show-user {q(user)} -p Name -p UID -p Linger"


def logind_config() -> str:
    """logind.conf with every drop-in, in the order systemd reads them (``# PATH`` before each file);
    without systemd-analyze, the files under /etc."""
    return ("systemd-analyze cat-config systemd/logind.conf 2>/dev/null || "
            f"for f in {LOGIND_CONF} {LOGIND_CONF}.d/*.conf; do "
            '[ -f "$f" ] && printf "# %s\\n" "$f" && cat "$f"; done; true')


def port_listeners(port: int) -> str:
    """Who listens on TCP ``port`` (console/probes/listeners.py): ``ss -ltnpH 'sport = :8000'``. ss names
    the process only to its owner and root; the filter is one argument, quoted."""
    return f"ss -ltnpH {q(f'sport = :{int(port)}')}"
