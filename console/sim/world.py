"""The simulated stations' state: one directory per world, one JSON file per station, and each
station's file tree (``stations/NAME/fs``: what its real paths hold, see ``console.sim.station_shell``).

This module is the state only. Time drives the rest: a container started at T is, at time now, at
offset ``now - T`` of its engine timeline (``console.sim.engine``: which log lines exist, how much
GPU memory is in use, whether the process has exited; ``docker start``/``stop`` too). Shims and the
sim server only read the files and compute from the clock, so several processes agree without
talking to each other. Writes take an flock and replace the file atomically.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import pickle
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # (the schema loads with the profile: a command that never asks for it skips ~15 ms)
    from console.config.schema import Profile

# Faults the simulator knows. A fault may name its station: "oom@B"; without one it applies
# where it is most realistic (see DEFAULT_FAULT_STATION: rank 1 = the first worker).
KNOWN_FAULTS = {
    "station-unreachable": "the station's SSH port accepts TCP but never answers",
    "oom": "a leftover process holds GPU memory (nvidia-smi shows it), so the weights run out of memory while "
           "loading; the container exits",
    "kv-too-small": "the config asks for the model's full 1M-token context: the KV cache cannot hold one such "
                    "request; engine init fails",
    "worker-dies": "the worker process is killed (exit code -9) after loading; the host's kernel log shows the OOM killer",
    "socket-fallback": "NCCL cannot load libibverbs and falls back to TCP sockets",
    "nccl-timeout": "the first collective never completes: watchdog timeout on the head",
    "mtu-mismatch": "the worker's rail has MTU 1500 while the head's has 9000",
    "link-down": "the rail link is down (no carrier)",
    "clock-skew": "the worker's clock is 2.5 s ahead and not synchronised",
    "rdma-port-down": "the RDMA port is DOWN",
    "slow-rail": "the rail negotiated a lower speed and RDMA bandwidth is low",
    "hostile-log": "the container prints escape sequences, control bytes, markup and a 300k-char line",
    "container-survives-stop": "docker stop cannot end the container (a process stuck in the GPU driver): it "
                               "keeps running and holding its memory",
    "port-stays-open": "after the stop something still answers on the head's API port",
    "memory-not-released": "the container stops but its memory does not come back (GB10: host memory that "
                           "nvidia-smi shows as 0 MB)",
    "gpu-lost": "a GPU fell off the bus: nvidia-smi prints an error line in place of its row",
    # The GPU tool itself: the connection and every other source stay fine. Each one holds
    # while it is set (World.set_faults: tests and the lab switch it on and off); the -cycle variants
    # switch themselves, SMI_CYCLE_S into every minute of the world's time (the demo).
    "smi-hang": "nvidia-smi stops answering (NVML stuck): no output, hangup ignored; it resumes when cleared",
    "smi-fail": "the driver fails: nvidia-smi prints 'Failed to initialize NVML: Driver/library version "
                "mismatch' and exits",
    "smi-hang-cycle": "smi-hang for 20 s of every minute (from 30 s into it)",
    "smi-fail-cycle": "smi-fail for 20 s of every minute (from 30 s into it)",
    "smi-garbage": "nvidia-smi prints hostile numbers in its cells: nan, inf, -inf, a 400-digit number, negative "
                   "values (memory, util, temperature, power, PCIe gen/width, ECC, clocks)",
    # NCCL launch facts
    "remove-ipc": "systemd-logind's RemoveIPC=yes (stock logind.conf) and the launch user does not linger: "
                  "its IPC objects vanish when the SSH session closes",
    # Hang evidence (RAS, flight recorder, py-spy --native)
    "desync": "serving, then the ranks fall out of step: this rank is one collective behind (it never launched the "
              "all-reduce the others wait in); RAS shows the spread, the service stalls",
    # Progress truth (wedge, init-hang)
    "wedge": "serving, then the engine wedges: 4 requests stay running, the generation-token counter freezes, "
             "/health keeps answering 200, the GPUs spin at 100 % util at idle power",
    "init-hang": "every rank stops in the first collective after NCCL init: the log goes silent, the GPUs spin "
                 "at 100 % at idle power, the watchdog is far off (none fires within the hour)",
    "stall-cycle": "serving under 4 requests, and every ~45 s the tokens freeze for 8-15 s, then move again on "
                   "their own (micro-stalls: shorter than the wedge window)",
    # GPU and fabric health (each holds while set; World.fault_since says since when)
    "gpu-pcie-downtrained": "the serving GPU's PCIe link trained down to Gen3 x8 (max Gen5 x16)",
    "gpu-ecc": "the serving GPU reports 2 uncorrected volatile ECC errors and a row remap pending",
    "gpu-power-capped": "the serving GPU's enforced power limit is 600 W (default 1000 W): clocks held by the cap",
    "xid": "the kernel log gets an Xid 48 (double-bit ECC) then an Xid 79 (fallen off the bus) for the serving GPU",
    "rail-flap": "the rail link goes down for 2 s of every 6 s (both ends)",
    "rail-errors": "the rail's RDMA port counts out-of-sequence packets (~1500/s), sequence errors and ACK timeouts",
    "smi-old-driver": "nvidia-smi of an older driver: it knows clocks_throttle_reasons.* only",
    # The API port
    "api-port-taken": "the login user's forgotten vLLM on the host (pid 4343) listens on the API port",
    "api-port-taken-hidden": "another user's server listens on the API port (ss shows this user no process "
                             "for it)",
    # Host memory
    "unified-memory-low": "unified memory (GB10): while the engine loads its weights and captures its CUDA graphs "
                          "MemAvailable sinks to about 2.5 GiB (page cache and a host process hold the rest); it "
                          "comes back once the engine serves",
}
SMI_CYCLE_S = (30.0, 50.0)  # the -cycle faults hold from 30 s to 50 s of every minute of the world's time
DEFAULT_FAULT_STATION = {
    "station-unreachable": 1,
    "oom": 1,
    "kv-too-small": 0,
    "worker-dies": 1,
    "socket-fallback": 1,
    "nccl-timeout": 0,
    "mtu-mismatch": 1,
    "link-down": 1,
    "clock-skew": 1,
    "rdma-port-down": 1,
    "slow-rail": 1,
    "hostile-log": 1,
    "container-survives-stop": 1,
    "port-stays-open": 0,
    "memory-not-released": 1,
    "gpu-lost": 0,
    "smi-hang": 1,
    "smi-fail": 1,
    "smi-hang-cycle": 1,
    "smi-fail-cycle": 1,
    "smi-garbage": 1,
    # NCCL launch facts
    "remove-ipc": 0,
    # Hang evidence
    "desync": 1,
    # Progress truth
    "wedge": 0,
    "init-hang": 0,
    "stall-cycle": 0,
    # GPU and fabric health
    "gpu-pcie-downtrained": 1, "gpu-ecc": 1, "gpu-power-capped": 1, "xid": 1, "rail-flap": 1, "rail-errors": 1,
    "smi-old-driver": 1,
    # Host memory
    "unified-memory-low": 0,
    "api-port-taken": 0,
    "api-port-taken-hidden": 0,
}
# What the kv-too-small fault puts into the operator's config (World.operator_overrides): the
# model's whole context, which no KV cache of these GPUs holds for one request.
FULL_CONTEXT = 1048576
HELD_PID = 4242  # the leftover process of the oom fault

SIM_RAIL_NET = "198.18.0."  # RFC 2544 benchmark range: never a real host
BASE_HOST_USED_MIB = {True: 5200, False: 21000}  # OS + services before the engine (unified / discrete)

# --- NCCL workbench faults: each one makes a `doctor` rung fail in the real formats.
# `nccl-timeout` above is a concrete cause since: it implies `gid-mismatch` on the first worker (the
# launch pins NCCL_IB_GID_INDEX=3 while that station's RoCE v2 GID of the rail address is index 5), and
# the head's watchdog lines follow from that (console/sim/workbench.py decides, from each run's env).
DOCTOR_FAULTS = {
    "gid-mismatch": "the station's RoCE v2 GID of the rail address is index 5; the launch pins NCCL_IB_GID_INDEX=3",
    "stale-rail": "the RDMA port is in a stale state: link up at full speed, RDMA at 8-25 Gb/s",
    "nccl-env-diff": "the station's launch sets NCCL_NET_GDR_LEVEL=LOC and NCCL_IB_TC=106 (the other station not)",
    "nccl-version-diff": "the station's launch loads the host's NCCL 2.27.3 (VLLM_NCCL_SO_PATH) instead of the image's",
    "collective-hang": "serving, then both ranks hang inside an all-reduce (no traffic, no network errors)",
    "kernel-errors": "mlx5 link down/up, an NVRM Xid and PCIe AER lines in the kernel log after the start",
    "mgmt-master": "the launch's --master-addr is the head's management address, not its rail address",
}
DOCTOR_FAULT_STATION = {"gid-mismatch": 1, "stale-rail": 1, "nccl-env-diff": 1, "nccl-version-diff": 1,
                        "collective-hang": 0, "kernel-errors": 1, "mgmt-master": 0}
IMPLIED_FAULTS = {"nccl-timeout": ("gid-mismatch", 1)}  # fault -> (implied fault, on this rank)
KNOWN_FAULTS.update(DOCTOR_FAULTS)
DEFAULT_FAULT_STATION.update(DOCTOR_FAULT_STATION)


def _implied(fault_map: dict[str, list[str]], names: list[str]) -> None:
    """Add the faults another fault stands for (on the worker it names; the head keeps the symptom)."""
    for name in names:
        for f in list(fault_map[name]):
            if f in IMPLIED_FAULTS:
                implied, rank = IMPLIED_FAULTS[f]
                target = name if names.index(name) >= 1 else names[min(rank, len(names) - 1)]
                if target != names[0] and implied not in fault_map[target]:
                    fault_map[target].append(implied)
# --- end of the NCCL workbench faults


# The profile the world was created with, as built (pickled by World.create, the simulator's own file
# in its own directory: the stations' data never reaches it).
PROFILE_FILE = "profile.pickle"


def station_names(n: int) -> list[str]:
    return [chr(ord("A") + i) if n <= 26 else f"S{i}" for i in range(n)]


class World:
    """A directory of simulated stations: ``root/world.json`` and ``root/stations/NAME/``."""

    def __init__(self, root: str | os.PathLike, profile: tuple[str, Profile] | None = None):
        """``profile``: (name, built) as another reader of this world built it (the shims' fork server)."""
        self.root = Path(root)
        self._meta: dict[str, Any] | None = None
        self._profile: tuple[str, Profile] | None = profile  # (name, parsed): a shim asks on every tick

    # ------------------------------------------------------------ creation

    @classmethod
    def create(
        cls,
        root: str | os.PathLike,
        profile_name: str,
        n_stations: int = 2,
        faults: list[str] | None = None,
        time_scale: float = 0.1,
    ) -> World:
        from console.config.profiles import load_profile  # (a shim never loads one: it reads PROFILE_FILE)

        profile = load_profile(profile_name)
        names = station_names(n_stations)
        fault_map: dict[str, list[str]] = {n: [] for n in names}
        for spec in faults or []:
            name, _, where = spec.partition("@")
            if name not in KNOWN_FAULTS:
                raise ValueError(f"unknown fault {name!r} (known: {', '.join(sorted(KNOWN_FAULTS))})")
            if where:
                if where not in fault_map:
                    raise ValueError(f"fault {spec!r}: no station named {where!r} (stations: {', '.join(names)})")
                target = where
            else:
                target = names[min(DEFAULT_FAULT_STATION[name], n_stations - 1)]
            fault_map[target].append(name)
        _implied(fault_map, names)
        root = Path(root)
        (root / "stations").mkdir(parents=True, exist_ok=True)
        overrides: dict[str, Any] = {}
        if any("kv-too-small" in f for f in fault_map.values()):
            overrides["max_model_len" if profile.engine == "vllm" else "context_length"] = FULL_CONTEXT
        meta = {
            "profile": profile_name if profile_name.endswith(".toml") else profile.name,  # a file: keep its path
            "stations": names,
            "time_scale": time_scale,
            "created_at": time.time(),
            "faults": fault_map,
            "operator_overrides": overrides,
        }
        _write_json(root / "world.json", meta)
        (root / PROFILE_FILE).write_bytes(pickle.dumps((meta["profile"], profile)))
        import hashlib  # here, not at the top: only creating a world hashes (~3 ms of every shim's start)

        digest = "sha256:" + hashlib.sha256(profile.image.encode()).hexdigest()
        for rank, name in enumerate(names):
            sdir = root / "stations" / name
            sdir.mkdir(parents=True, exist_ok=True)
            state = {
                "name": name,
                "rank": rank,
                "hostname": f"station-{name.lower()}",
                "rail": {
                    "netdev": "enp1s0f1np1" if not profile.gpu.unified_memory else "enp1s0f1np1",
                    "rdma": profile.link.rails[0] if profile.link.rails else "mlx5_0",
                    "ip": f"{SIM_RAIL_NET}{rank + 1}",
                },
                "gpus": _gpus_for(profile, name),
                "host_mem_total_mib": 123904 if profile.gpu.unified_memory else 507904,
                "containers": {
                    "glm53": {
                        "state": "exited",
                        "image": profile.image,
                        "image_id": digest,
                        "runs": [],
                    }
                },
                "api_port": None,
            }
            if "oom" in fault_map[name]:
                hold_memory(profile, state, n_stations)
            _write_json(sdir / "state.json", state)
        return cls(root)

    # ------------------------------------------------------------ reading

    @property
    def meta(self) -> dict[str, Any]:
        if self._meta is None:
            self._meta = json.loads((self.root / "world.json").read_text())
        return self._meta

    @property
    def profile(self) -> Profile:
        """The world's profile (frozen), parsed once: a looping shim asks several times per tick, and
        parsing the TOML each time cost three quarters of a tick's CPU."""
        name = self.meta["profile"]
        if self._profile is None or self._profile[0] != name:
            self._profile = (name, self._built_profile(name))
        return self._profile[1]

    def _built_profile(self, name: str) -> Profile:
        """The profile as ``create`` built it (PROFILE_FILE), else loaded by name: reading the TOML and
        checking it again in every shim cost ~15 ms of the ~75 each command's start takes."""
        from console.config.schema import Profile

        try:
            kept, profile = pickle.loads((self.root / PROFILE_FILE).read_bytes())
        except (OSError, ValueError, EOFError, pickle.UnpicklingError, AttributeError, ImportError):
            kept, profile = None, None  # (a world from before the file, or one torn while written: the slow way)
        if kept == name and isinstance(profile, Profile):
            return profile
        from console.config.profiles import load_profile

        return load_profile(name)

    @property
    def names(self) -> list[str]:
        return list(self.meta["stations"])

    @property
    def time_scale(self) -> float:
        return float(self.meta["time_scale"])

    @property
    def operator_overrides(self) -> dict[str, Any]:
        """Serving settings the world's operator asked for (a fault's cause); the sim's config has them."""
        return dict(self.meta.get("operator_overrides") or {})

    def faults(self, station: str) -> list[str]:
        return list(self.meta["faults"].get(station, []))

    def faults_now(self, station: str) -> list[str]:
        """The station's faults as world.json says them now (a looping shim sees one switched on or
        off while it runs), the -cycle faults as the plain fault while their window holds."""
        self._meta = None
        out = []
        for f in self.faults(station):
            if f.endswith("-cycle") and f != "stall-cycle":  # (stall-cycle keeps its own clock: stall_cycle.py)
                lo, hi = SMI_CYCLE_S
                if lo <= (time.time() - float(self.meta["created_at"])) % 60.0 < hi:
                    out.append(f.removesuffix("-cycle"))
            else:
                out.append(f)
        return out

    def set_faults(self, station: str, faults: list[str]) -> None:
        """Switch a station's faults while the world runs (read by the shims on their next look)."""
        for f in faults:
            if f not in KNOWN_FAULTS:
                raise ValueError(f"unknown fault {f!r} (known: {', '.join(sorted(KNOWN_FAULTS))})")
        path = self.root / "world.json"
        with open(self.root / ".world.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            meta = json.loads(path.read_text())
            on = meta.setdefault("fault_on", {}).setdefault(station, {})  # since when (fault_since)
            for f in faults:
                if f not in meta["faults"].get(station, []):
                    on[f] = time.time()
            meta["faults"][station] = list(faults)
            _write_json(path, meta)
        self._meta = None

    def fault_since(self, station: str, fault: str) -> float:
        """When ``fault`` was last switched on at ``station`` (a fault of the world's creation: then)."""
        on = self.meta.get("fault_on", {}).get(station, {})
        return float(on.get(fault, self.meta["created_at"]))

    def station_dir(self, name: str) -> Path:
        return self.root / "stations" / name

    def fs_dir(self, name: str) -> Path:
        """The station's file tree: ``fs_dir / "proc/meminfo"`` is what its /proc/meminfo holds."""
        return self.station_dir(name) / "fs"

    def state(self, name: str) -> dict[str, Any]:
        return json.loads((self.station_dir(name) / "state.json").read_text())

    @contextlib.contextmanager
    def edit(self, name: str):
        """Read-modify-write a station's state under an exclusive lock."""
        path = self.station_dir(name) / "state.json"
        with open(self.station_dir(name) / ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            state = json.loads(path.read_text())
            yield state
            _write_json(path, state)

    def set_api_port(self, name: str, port: int) -> None:
        with self.edit(name) as st:
            st["api_port"] = port


def hold_memory(profile: Profile, state: dict[str, Any], n_stations: int) -> None:
    """The oom fault's cause: a leftover process holding enough of the serving GPU (GB10: of the
    unified memory) that the weights (this rank's share of them) stop loading at about 60 %."""
    from console.config.schema import tensor_parallel_for, weights_per_gpu_gib

    total = (state["host_mem_total_mib"] - BASE_HOST_USED_MIB[True]) if profile.gpu.unified_memory else profile.gpu.memory_total_mib
    weights = weights_per_gpu_gib(profile, tensor_parallel_for(profile, n_stations))
    held = int(total - 1024 * (0.6 * weights + 0.6))
    for g in state["gpus"]:
        if g["serving"]:
            g["held_mib"], g["held_pid"] = held, HELD_PID


def held_mib(gpu: dict[str, Any]) -> int:
    """Memory on a simulated GPU that no running container of ours accounts for."""
    return int(gpu.get("held_mib", 0)) + int(gpu.get("leaked_mib", 0))


def _gpus_for(profile: Profile, station: str) -> list[dict[str, Any]]:
    import hashlib  # see World.create

    from console.config.schema import gpus_per_station

    def uuid(i: int) -> str:
        h = hashlib.sha1(f"{station}-{i}-{profile.gpu.name}".encode()).hexdigest()
        return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"

    gpus = []
    if profile.gpu.extra_display_gpu:
        gpus.append({"name": profile.gpu.extra_display_gpu, "total_mib": 97887, "serving": False,
                     "idle_mib": 1184, "unified": False})
    for _ in range(gpus_per_station(profile)):
        gpus.append({"name": profile.gpu.name, "total_mib": profile.gpu.memory_total_mib, "serving": True,
                     "idle_mib": 0, "unified": profile.gpu.unified_memory})
    for i, g in enumerate(gpus):
        g["index"] = i
        g["uuid"] = uuid(i)
    return gpus


def _write_json(path: Path, data: Any) -> None:
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(data, indent=1))
    os.replace(tmp, path)


def append_log(world: World, name: str, line: str, at: float | None = None) -> None:
    """Lines the running service prints later (request logs, stats); docker logs merges them."""
    t = time.time() if at is None else at
    with open(world.station_dir(name) / "extra.log", "a") as fh:
        fh.write(f"{t:.6f} {line}\n")
