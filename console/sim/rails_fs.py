"""The simulated stations' rail sysfs: ``/sys/class/net/NETDEV/{operstate,carrier,speed,
mtu,carrier_changes,statistics/*}`` and the RDMA port's ``state`` and ``hw_counters/*`` in each
station's tree, rewritten every second by the sim server (as the kernel keeps them), so the
console's rails loop reads them at their real paths (console/sim/station_shell.py binds them).

Counters only grow: each write adds what the faults make happen since the last one (read back from
the files, so any process may write). ``carrier_changes`` counts every change of the carrier, as
the kernel does. Faults: ``rail-flap`` (down 2 s of every 6 s, console/sim/shims/_net.py),
``rail-errors`` (out-of-sequence, sequence errors, ACK timeouts rising), ``link-down``."""

from __future__ import annotations

import os
import time
from pathlib import Path

from console.remote.cmdlines.links import NET_SYSFS, RDMA_SYSFS
from console.sim.shims._net import mac, rails
from console.sim.world import World

# per second while rail-errors holds
ERROR_RATES = {"out_of_sequence": 1500.0, "packet_seq_err": 40.0, "local_ack_timeout_err": 3.0}
COUNTERS = ("out_of_sequence", "local_ack_timeout_err", "packet_seq_err", "np_ecn_marked_roce_packets",
            "rp_cnp_handled")
STATS = ("rx_errors", "tx_errors", "rx_dropped", "tx_dropped")


def _read(path: Path, default: str = "0") -> str:
    try:
        return path.read_text().strip()
    except OSError:
        return default


def _write(path: Path, value: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    tmp.write_text(f"{value}\n")
    os.replace(tmp, path)


def write_rails(world: World, name: str, now: float | None = None) -> None:
    now = time.time() if now is None else now
    root = world.fs_dir(name)
    faults = set(world.faults_now(name))
    for r in rails(world, name):
        if r.real:  # a lab rail: the kernel keeps its files
            continue
        net = root / NET_SYSFS.lstrip("/") / r.netdev
        stamp = net / ".written"
        last = float(_read(stamp, str(now)))
        dt = max(0.0, min(now - last, 10.0))
        was_up = _read(net / "carrier", "1") == "1"
        changes = int(_read(net / "carrier_changes", "0") or 0) + (1 if was_up != r.up else 0)
        if not (net / "address").exists():
            _write(net / "address", mac(name, r.netdev))
        _write(net / "operstate", "up" if r.up else "down")
        _write(net / "carrier", "1" if r.up else "0")
        _write(net / "speed", r.speed_mbps if r.up else -1)
        _write(net / "mtu", r.mtu)
        _write(net / "carrier_changes", changes)
        for s in STATS:
            if not (net / "statistics" / s).exists():
                _write(net / "statistics" / s, 0)
        port = root / RDMA_SYSFS.lstrip("/") / r.device / "ports" / "1"
        _write(port / "state", "4: ACTIVE" if r.port_active else "1: DOWN")
        for c in COUNTERS:
            f = port / "hw_counters" / c
            v = float(_read(f, "0") or 0)
            if r.primary and "rail-errors" in faults:
                v += ERROR_RATES.get(c, 0.0) * dt
            _write(f, int(v))
        _write(stamp, f"{now:.3f}")
