"""How a simulated station runs a command line: its side of the SSH session.

The console sends a simulated station exactly the command line a real station runs
(``console/remote/cmdlines/``: ``cat /proc/meminfo``, ``cd /sys/class/infiniband/...``,
``cat "$HOME"/glm53.env``). The station answers it from its own side, as sshd and the station's
file system would:

- ``PATH`` with the shim directory first (``nvidia-smi``, ``docker``, ... print the real formats);
- ``HOME`` the login user's home inside the station's file tree (``stations/NAME/fs``);
- the station's mounts: each real path its tree supplies (``/proc/meminfo``, the RDMA sysfs, the
  model directory) is bound to the tree, the way a bind mount would be, by substituting it in the
  command line before the shell reads it. A mount namespace would do the same without touching
  the text, but needs privileges that a user running ``dgx-console demo`` does not have.

A command one station passes on to another (``ssh PEER 'cat /proc/meminfo'``) had its paths bound
to the first station's tree by then; the peer binds them back to its own. The in-process asyncssh
server calls ``prepare`` for every session (and logs the command as the console sent it); real sshd
(the lab tier) runs ``python -m console.sim.station_shell`` as its ``ForceCommand``, which does the
same with ``$SSH_ORIGINAL_COMMAND``. Kept to the standard library: it starts once per command there.
"""

from __future__ import annotations

import json
import os
import re
import site
import sys
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

MOUNTS_FILE = "mounts.json"
# A path the substitution writes into a command line unquoted must stay one shell word as it is.
_SHELL_SAFE = re.compile(r"[\w@%+=:,./-]+")


class Mounts:
    """A station's mount table: its home and the real paths bound to its file tree."""

    def __init__(self, home: str, binds: Iterable[tuple[str, str]]):
        self.home = home
        self.binds = tuple((real, mapped) for real, mapped in binds)
        self._bind = _substitution(dict(self.binds))
        self._unbind = _substitution({mapped: real for real, mapped in self.binds})

    def bind(self, command: str) -> str:
        """``command`` with every bound real path replaced by its place in the station's tree."""
        return self._bind(command)

    def unbind(self, command: str) -> str:
        """``command`` with this station's tree paths back at their real paths."""
        return self._unbind(command)


def _substitution(table: dict[str, str]) -> Callable[[str], str]:
    """Replace each key of ``table`` where a whole path starts (not inside another path) and ends
    (``/models/x`` is not ``/models/x-v2``), the longest first (``/a/b`` wins over ``/a``)."""
    if not table:
        return lambda text: text
    alts = "|".join(re.escape(k) for k in sorted(table, key=len, reverse=True))
    pattern = re.compile(rf"(?<![\w.~/-])(?:{alts})(?![\w.-])")
    return lambda text: pattern.sub(lambda m: table[m.group(0)], text)


def mounts_path(root: str | os.PathLike, station: str) -> Path:
    return Path(root) / "stations" / station / MOUNTS_FILE


def write_mounts(root: str | os.PathLike, station: str, fs: Path, home: str, real_paths: Iterable[str]) -> None:
    """Record station ``station``'s mounts: ``home`` and each of ``real_paths`` at the same place
    under its tree ``fs``."""
    binds = [[p, str(fs / p.lstrip("/"))] for p in real_paths]
    for _real, mapped in binds:
        if not _SHELL_SAFE.fullmatch(mapped):
            raise ValueError(f"the simulated stations' directory {fs} must be a path without spaces or shell "
                             "special characters")
    path = mounts_path(root, station)
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    tmp.write_text(json.dumps({"home": str(fs / home.lstrip("/")), "binds": binds}))
    os.replace(tmp, path)


def read_mounts(root: str | os.PathLike, station: str) -> Mounts:
    data = json.loads(mounts_path(root, station).read_text())
    return Mounts(data["home"], (tuple(b) for b in data["binds"]))


def read_all_mounts(root: str | os.PathLike) -> dict[str, Mounts]:
    """Every station's mount table (by station name)."""
    return {p.parent.name: read_mounts(root, p.parent.name) for p in Path(root).glob(f"stations/*/{MOUNTS_FILE}")}


def station_env(base: Mapping[str, str], root: str | os.PathLike, station: str, mounts: Mounts) -> dict[str, str]:
    """The session environment: ``base`` with the shims first on PATH, the station's home, and the
    variables the shims read to find their world (never part of a command line)."""
    env = dict(base)
    bin_dir = str(Path(root) / "bin")
    path = env.get("PATH", "/usr/bin:/bin")
    if not path.startswith(bin_dir + ":"):
        env["PATH"] = f"{bin_dir}:{path}"
    # The shims are Python: with HOME moved, a per-user install must still be found where it is.
    env.setdefault("PYTHONUSERBASE", site.getuserbase())
    env["HOME"] = mounts.home
    env["XDG_RUNTIME_DIR"] = mounts.home  # each station its own runtime dir (the nvidia-smi lock is per station)
    env["DGX_SIM_ROOT"] = str(root)
    env["DGX_SIM_STATION"] = station
    env.pop("SSH_ORIGINAL_COMMAND", None)
    return env


def prepare(command: str, root: str | os.PathLike, station: str, base_env: Mapping[str, str],
            mounts: Mapping[str, Mounts] | None = None) -> tuple[str, dict[str, str]]:
    """(command line for the station's shell, its environment) for ``command`` as the console (or a
    peer station) sent it. ``mounts``: every station's (``read_all_mounts``), read when not given."""
    mounts = mounts if mounts is not None else read_all_mounts(root)
    for other in mounts.values():
        command = other.unbind(command)
    own = mounts[station]
    return own.bind(command), station_env(base_env, root, station, own)


def session_dir(env: Mapping[str, str]) -> str | None:
    """Where a session starts: the login's home, as sshd starts it (a relative path a peer's rsync
    names is under it), or None (the caller's directory) while the home does not exist yet."""
    home = env.get("HOME")
    return home if home and os.path.isdir(home) else None


def main() -> int:
    """sshd's ``ForceCommand`` on a lab station: run ``$SSH_ORIGINAL_COMMAND`` as this station does."""
    root, station = os.environ.get("DGX_SIM_ROOT"), os.environ.get("DGX_SIM_STATION")
    if not root or not station:
        print("station_shell: DGX_SIM_ROOT/DGX_SIM_STATION unset (set them in sshd's SetEnv)", file=sys.stderr)
        return 127
    command = os.environ.get("SSH_ORIGINAL_COMMAND")
    shell = os.environ.get("SHELL") or "/bin/sh"
    line, env = prepare(command or "", root, station, os.environ)
    argv = [shell, "-c", line] if command else [shell, "-l"]
    if (where := session_dir(env)) is not None:
        os.chdir(where)
    os.execve(shell, argv, env)
    return 127  # not reached


if __name__ == "__main__":
    raise SystemExit(main())
