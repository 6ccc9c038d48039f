"""Two simulated stations as network namespaces with real OpenSSH sshd, a management link from the
root namespace to each, and a veth "rail" between them (MTU 9000, 198.18.0.0/15 only).

The GPU, Docker and RDMA commands are the simulator's shims (first on PATH through sshd's
``SetEnv``); ``ip``, ``ping``, ``ssh`` and ``date`` are the real ones. sshd's ``ForceCommand`` runs
each command line the console sends as the simulated station does (``console.sim.station_shell``:
its home and the files its tree supplies, e.g. the checkpoint and the RDMA counters), so the
console's command lines are exactly a real station's. The ssh client inside each
namespace finds its key and known_hosts through ``/etc/netns/NS/ssh/ssh_config`` (``ip netns exec``
bind-mounts it over /etc/ssh there), so the host's own ~/.ssh is never touched.
Everything is named after a per-run id and removed by ``teardown`` (idempotent, also at exit).
"""

from __future__ import annotations

import atexit
import fcntl
import os
import secrets
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import console
from console.config import parse_config
from console.sim.shim import write_bin
from console.sim.shims._stationfs import populate
from console.sim.world import World

SSHD = os.environ.get("DGX_LAB_SSHD", "/usr/sbin/sshd")  # override only to prove the CI guard
REAL_TOOLS = ("ip", "ping", "ssh", "date", "df")  # the lab uses the real ones
RAIL_IFACE = "enp1s0f1np1"
PROFILE = "glm53-nvfp4-2x-gb300-vllm"


def missing_prerequisites() -> list[str]:
    """What this machine lacks to build the lab (empty when it can)."""
    out = []
    if os.geteuid() != 0:
        out.append("root (network namespaces)")
    for tool in ("ip", "ping", "ssh", "ssh-keygen"):
        if shutil.which(tool) is None:
            out.append(tool)
    if not os.access(SSHD, os.X_OK):
        out.append(SSHD + " (openssh-server)")
    if not out:
        name = "dgxprobe" + secrets.token_hex(3)
        r = subprocess.run(["ip", "netns", "add", name], capture_output=True, text=True)
        if r.returncode != 0:
            out.append(f"ip netns add: {r.stderr.strip()}")
        else:
            subprocess.run(["ip", "netns", "del", name], capture_output=True)
    return out


SLOTS_DIR = Path("/run/dgx-console-lab")  # one lock file per subnet octet, for every process on the host


class _Slot:
    """One of 256 octets X for the lab's subnets (198.19.X.0/29, 198.18.X.0/30), held by an exclusive
    lock on its file: two labs built at once (parallel test processes) never share one, and a process
    that dies releases its lock with it, so no stale claim outlives a crashed run."""

    def __init__(self, octet: int, fh) -> None:
        self.octet = octet
        self._fh = fh

    def release(self) -> None:
        if self._fh is not None:
            self._fh.close()  # closing the file drops the lock
            self._fh = None


def _claim_slot() -> _Slot:
    SLOTS_DIR.mkdir(mode=0o700, exist_ok=True)
    start = secrets.randbelow(256)  # where to begin: labs left by a crashed run keep no lock
    for i in range(256):
        octet = (start + i) % 256
        fh = open(SLOTS_DIR / f"{octet}.lock", "a")  # held open: the lock lives with it
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fh.close()
            continue
        return _Slot(octet, fh)
    raise RuntimeError(f"no free lab subnet: all 256 octets locked under {SLOTS_DIR}")


def sh(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    r = subprocess.run(list(args), capture_output=True, text=True)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(args)}: {r.stderr.strip() or r.stdout.strip()}")
    return r


class Lab:
    def __init__(self) -> None:
        self.id = secrets.token_hex(3)
        self.dir = Path(tempfile.mkdtemp(prefix=f"dgx-lab-{self.id}-"))
        self.ns = {"A": f"dgxlab-{self.id}-a", "B": f"dgxlab-{self.id}-b"}
        self.host_if = {"A": f"dl{self.id}a", "B": f"dl{self.id}b"}
        self._slot = _claim_slot()
        octet = self._slot.octet
        # management: root <-> A on 198.19.X.0/30, root <-> B on 198.19.X.4/30; rail 198.18.X.0/30
        self.mgmt_root = {"A": f"198.19.{octet}.1", "B": f"198.19.{octet}.5"}
        self.mgmt = {"A": f"198.19.{octet}.2", "B": f"198.19.{octet}.6"}
        self.rail = {"A": f"198.18.{octet}.1", "B": f"198.18.{octet}.2"}
        self.mgmt_net = f"198.19.{octet}.0/29"
        # The login user's home inside the lab (see _keys): not /root, whose rc files are the host's.
        self.home = self.dir / "home"
        self.home.mkdir()
        self.sshd: dict[str, subprocess.Popen] = {}
        self.world: World | None = None
        self._torn = False
        atexit.register(self.teardown)

    # ------------------------------------------------------------ build

    def setup(self) -> Lab:
        try:
            self._world()
            self._net()
            self._keys()
            for name in ("A", "B"):
                self.start_sshd(name)
            self._known_hosts_between()
        except BaseException:
            self.teardown()
            raise
        return self

    def _world(self) -> None:
        self.world = World.create(self.dir / "world", PROFILE, 2, [], 0.02)
        for name in ("A", "B"):
            with self.world.edit(name) as st:
                st["rail"]["ip"] = self.rail[name]
                st["rail"]["netdev"] = RAIL_IFACE
                st["rail"]["real"] = True
        write_bin(self.world.root / "bin", exclude=REAL_TOOLS)
        populate(self.world, home=str(self.home), real_meminfo=True)  # host memory: the machine's own

    def _net(self) -> None:
        rail_a, rail_b = f"dr{self.id}a", f"dr{self.id}b"
        for name, ns in self.ns.items():
            sh("ip", "netns", "add", ns)
            sh("ip", "-n", ns, "link", "set", "lo", "up")
            peer = f"dm{self.id}{name.lower()}"
            sh("ip", "link", "add", self.host_if[name], "type", "veth", "peer", "name", peer)
            sh("ip", "link", "set", peer, "netns", ns)
            sh("ip", "-n", ns, "link", "set", peer, "name", "mgmt0")
            sh("ip", "-n", ns, "addr", "add", f"{self.mgmt[name]}/30", "dev", "mgmt0")
            sh("ip", "-n", ns, "link", "set", "mgmt0", "up")
            sh("ip", "addr", "add", f"{self.mgmt_root[name]}/30", "dev", self.host_if[name])
            sh("ip", "link", "set", self.host_if[name], "up")
        # Nothing for the lab's management addresses may ever leave by the default route (a cut link
        # removes the connected route): a blackhole below the /30s keeps them here.
        sh("ip", "route", "replace", "blackhole", self.mgmt_net, "metric", "4000")
        sh("ip", "link", "add", rail_a, "type", "veth", "peer", "name", rail_b)
        for name, dev in (("A", rail_a), ("B", rail_b)):
            ns = self.ns[name]
            sh("ip", "link", "set", dev, "netns", ns)
            sh("ip", "-n", ns, "link", "set", dev, "name", RAIL_IFACE)
            sh("ip", "-n", ns, "link", "set", RAIL_IFACE, "mtu", "9000")
            sh("ip", "-n", ns, "addr", "add", f"{self.rail[name]}/30", "dev", RAIL_IFACE)
            sh("ip", "-n", ns, "link", "set", RAIL_IFACE, "up")

    def _keys(self) -> None:
        keys = self.dir / "keys"
        keys.mkdir()
        # the console's key (root namespace -> each station's management address)
        sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(keys / "console"))
        for name in ("A", "B"):
            sdir = self.dir / name
            (sdir / "etc-ssh").mkdir(parents=True)
            sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(sdir / "host_ed25519"))
            sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(sdir / "id_ed25519"))
        # authorized: the console everywhere; A's station key on B (passwordless A -> B)
        for name in ("A", "B"):
            lines = [(keys / "console.pub").read_text()]
            if name == "B":
                lines.append((self.dir / "A" / "id_ed25519.pub").read_text())
            (self.dir / name / "authorized_keys").write_text("".join(lines))
        known = "".join(f"{self.mgmt[n]} {(self.dir / n / 'host_ed25519.pub').read_text()}" for n in ("A", "B"))
        (keys / "known_hosts").write_text(known)
        for name, ns in self.ns.items():
            etc = Path("/etc/netns") / ns / "ssh"
            etc.mkdir(parents=True, exist_ok=True)
            if Path("/etc/ssh/moduli").exists():
                shutil.copy("/etc/ssh/moduli", etc / "moduli")
            # Sessions log in with a home of the lab's own: the host's ~/.bashrc (pyenv init, which takes a
            # machine-wide rehash lock) must not run in sessions a fault test kills mid-start.
            (etc.parent / "passwd").write_text("".join(
                (":".join(f if i != 5 else str(self.home) for i, f in enumerate(ln.split(":"))) if ln.startswith("root:")
                 else ln) + "\n" for ln in Path("/etc/passwd").read_text().splitlines()))
            sdir = self.dir / name
            (etc / "ssh_config").write_text(
                "Host *\n"
                f"    IdentityFile {sdir / 'id_ed25519'}\n"
                f"    UserKnownHostsFile {sdir / 'known_hosts'}\n"
                "    GlobalKnownHostsFile /dev/null\n"
                "    StrictHostKeyChecking yes\n"
            )
            (sdir / "known_hosts").write_text("")
            cfg = sdir / "sshd_config"
            path = f"{self.world.root / 'bin'}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
            code = Path(console.__file__).resolve().parent.parent  # the shims run the code under test
            shell = f"{shlex.quote(sys.executable)} -m console.sim.station_shell"
            cfg.write_text(
                f"ListenAddress {self.mgmt[name]}\n"
                f"ListenAddress {self.rail[name]}\n"
                "Port 22\n"
                f"HostKey {sdir / 'host_ed25519'}\n"
                f"AuthorizedKeysFile {sdir / 'authorized_keys'}\n"
                f"PidFile {sdir / 'sshd.pid'}\n"
                "PermitRootLogin prohibit-password\n"
                "PasswordAuthentication no\n"
                "KbdInteractiveAuthentication no\n"
                "UsePAM no\n"
                "StrictModes no\n"
                "MaxStartups 64\n"
                "LogLevel ERROR\n"
                f"SetEnv PATH={path} PYTHONPATH={code} DGX_SIM_ROOT={self.world.root} DGX_SIM_STATION={name}\n"
                f"ForceCommand {shell}\n"
            )

    def _known_hosts_between(self) -> None:
        """A trusts B's host key on the rail address (the operator did `ssh B true` once)."""
        pub = (self.dir / "B" / "host_ed25519.pub").read_text()
        (self.dir / "A" / "known_hosts").write_text(f"{self.rail['B']} {pub}")

    # ------------------------------------------------------------ sshd

    def start_sshd(self, name: str) -> None:
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # privilege separation dir
        cfg = self.dir / name / "sshd_config"
        proc = subprocess.Popen(["ip", "netns", "exec", self.ns[name], SSHD, "-D", "-e", "-f", str(cfg)],
                                stdout=subprocess.DEVNULL, stderr=open(self.dir / name / "sshd.log", "ab"),
                                start_new_session=True)
        self.sshd[name] = proc
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            r = sh("ip", "netns", "exec", self.ns[name], "ss", "-ltn", check=False) if shutil.which("ss") else None
            if r is not None and f"{self.mgmt[name]}:22" in r.stdout:
                return
            if r is None and (self.dir / name / "sshd.pid").exists():
                return
            if proc.poll() is not None:
                raise RuntimeError(f"sshd for {name} exited: {(self.dir / name / 'sshd.log').read_text()[-400:]}")
            time.sleep(0.05)
        raise RuntimeError(f"sshd for {name} did not start listening")

    def kill_sshd(self, name: str) -> None:
        """Kill every process of station ``name``'s sshd (listener and sessions)."""
        self._kill_ns_processes(self.ns[name])
        proc = self.sshd.pop(name, None)
        if proc is not None:
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=5)

    def _kill_ns_processes(self, ns: str) -> None:
        r = sh("ip", "netns", "pids", ns, check=False)
        for pid in (int(p) for p in r.stdout.split() if p.isdigit()):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def restart_sshd(self, name: str) -> None:
        self.kill_sshd(name)
        self.start_sshd(name)

    def set_sshd_option(self, name: str, key: str, value: str) -> None:
        """One sshd_config keyword for station ``name`` (e.g. MaxSessions 2), sshd restarted."""
        cfg = self.dir / name / "sshd_config"
        lines = [ln for ln in cfg.read_text().splitlines() if not ln.startswith(key + " ")]
        cfg.write_text("\n".join([f"{key} {value}", *lines]) + "\n")
        self.restart_sshd(name)

    def new_host_key(self, name: str) -> str:
        """The station was reinstalled (or someone is in between): a new host key; returns its
        SHA256 fingerprint as ``ssh-keygen -l`` prints it."""
        key = self.dir / name / "host_ed25519"
        for p in (key, key.with_suffix(".pub")):
            p.unlink(missing_ok=True)
        sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key))
        self.restart_sshd(name)
        return sh("ssh-keygen", "-l", "-f", str(key.with_suffix(".pub"))).stdout.split()[1]

    # ------------------------------------------------------------ faults

    def cut(self, name: str) -> None:
        """A silent cut of the console's path to ``name``: the management veth between the two
        namespaces goes down at the station's end (our end loses carrier, its route stays and
        drops). No FIN, no RST: sshd and everything on the station keep running."""
        sh("ip", "-n", self.ns[name], "link", "set", "mgmt0", "down")

    def restore(self, name: str) -> None:
        sh("ip", "-n", self.ns[name], "link", "set", "mgmt0", "up")

    def set_faults(self, name: str, faults: list[str]) -> None:
        """The simulator's faults of station ``name`` (read by the shims on their next run)."""
        import json

        meta_path = self.world.root / "world.json"
        meta = json.loads(meta_path.read_text())
        meta["faults"][name] = list(faults)
        meta_path.write_text(json.dumps(meta))
        self.world._meta = None

    def start_containers(self) -> None:
        from console.sim.server import start_service

        start_service(self.world, gap_s=0.0)

    def set_mtu(self, name: str, mtu: int) -> None:
        sh("ip", "-n", self.ns[name], "link", "set", RAIL_IFACE, "mtu", str(mtu))

    def rail_down(self, name: str) -> None:
        sh("ip", "-n", self.ns[name], "link", "set", RAIL_IFACE, "down")

    def rail_up(self, name: str) -> None:
        sh("ip", "-n", self.ns[name], "link", "set", RAIL_IFACE, "up")

    def remove_a_to_b_key(self) -> None:
        (self.dir / "B" / "authorized_keys").write_text((self.dir / "keys" / "console.pub").read_text())

    def counter_path(self, name: str, counter: str) -> Path:
        return self.world.station_dir(name) / "fs" / "sys/class/infiniband/mlx5_0/ports/1/counters" / counter

    def bump_counter(self, name: str, counter: str, value: int) -> None:
        self.counter_path(name, counter).write_text(f"{value}\n")

    # ------------------------------------------------------------ the console's side

    def config_text(self) -> str:
        lines = ['profile = "glm53-nvfp4-2x-gb300-vllm"', "connect_timeout_s = 3.0", "command_timeout_s = 30.0", ""]
        for rank, name in enumerate(("A", "B")):
            lines += [
                "[[stations]]", f'name = "{name}"', f'host = "{self.mgmt[name]}"', f"rank = {rank}", 'user = "root"',
                f'rail_netdev = "{RAIL_IFACE}"', 'rdma_device = "mlx5_0"', f'rail_ip = "{self.rail[name]}"',
                f'known_hosts = "{self.dir / "keys" / "known_hosts"}"',
                f'identity_file = "{self.dir / "keys" / "console"}"', "",
            ]
        return "\n".join(lines)

    def config_path(self) -> Path:
        path = self.dir / "lab.toml"
        path.write_text(self.config_text())
        return path

    def config(self):
        path = self.config_path()
        return parse_config(path.read_text(), str(path))

    # ------------------------------------------------------------ teardown

    def teardown(self) -> None:
        if self._torn:
            return
        self._torn = True
        for ns in self.ns.values():
            self._kill_ns_processes(ns)
        for proc in self.sshd.values():
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
        for ns in self.ns.values():
            sh("ip", "netns", "del", ns, check=False)
            shutil.rmtree(Path("/etc/netns") / ns, ignore_errors=True)
        for dev in self.host_if.values():  # gone with the namespace's end; make sure
            sh("ip", "link", "del", dev, check=False)
        sh("ip", "route", "del", "blackhole", self.mgmt_net, "metric", "4000", check=False)
        shutil.rmtree(self.dir, ignore_errors=True)
        self._slot.release()  # last: the addresses are free only once the namespaces are gone
        atexit.unregister(self.teardown)
