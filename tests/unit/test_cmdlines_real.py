"""The command lines are exactly what runs on a real station: no simulator hook in any of them (the
simulated stations supply their own paths: console/sim/station_shell.py), real paths as written."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

from console.remote import cmdlines


def _locked(run: str) -> str:
    """A one-shot nvidia-smi as it runs: only while no earlier one is stuck (the per-user lock)."""
    return (f"if command -v flock >/dev/null 2>&1; then flock -w 3 -E 137 "
            f'"${{XDG_RUNTIME_DIR:-/tmp}}/dgx-console-nvidia-smi-$(id -u).lock" {run}; else {run}; fi')

# One value per parameter name of the builders (a new builder with a new parameter must add it here).
ARGS = {
    "loop_ms": 1000, "interval_s": 2.0, "container": "glm53", "since": "2026-01-05T10:00:00.000000000Z",
    "tail": 1000, "follow": True, "timeout_s": 30, "image": "nvcr.io/nvidia/vllm:26.01-py3",
    "new_name": "glm53-prev", "iface": "enp1s0f1np1", "peer": "198.18.0.2", "payload": 8972, "count": 3,
    "device": "mlx5_0", "port": 1, "connect_timeout_s": 5, "model_dir": "/models/GLM-5.3-NVFP4",
    "path": "~/launch-glm53.sh", "gid_index": 3, "extra": ["--use_cuda=0"], "server_ip": "198.18.0.1",
    "pid": 4242, "ranks": [("198.18.0.1", {"NCCL_IB_HCA": "mlx5_0"}), ("198.18.0.2", {"NCCL_IB_HCA": "mlx5_0"})],
    "binary": "/usr/local/bin/all_reduce_perf", "test_args": ["-b", "8", "-e", "1G"], "allow_root": True,
    "epoch": 1767607200.5, "log_path": "~/.cache/dgx-console/launch-glm53.log", "lines": 20,
    "limit_s": 10, "cmd": "nvidia-smi -L", "native": True,
    "user": "nvidia",
    "prefix": "clocks_event_reasons", "rails": [("enp1s0f1np1", "mlx5_0")], "since_epoch": 1767607200.5,
    "pids": [4242, 17], "signal": "TERM",
}
SIM_WORDS = ("DGX_SIM", "DGX_MEMINFO", "STATION_ROOT", "stations/")


# The families with their own tests (their helpers are no builders of one command line each).
OWN_TESTS = ("batch", "copy", "identity", "processes", "tasks")


def builders() -> list:
    """Every builder the package gives its callers (``rc.NAME``), whichever family module holds it."""
    own = tuple(f"{cmdlines.__name__}.{m}" for m in OWN_TESTS)
    named = [getattr(cmdlines, name) for name in cmdlines.__all__]  # each family loads on first use
    return [f for f in named if inspect.isfunction(f)
            and f.__module__.startswith(cmdlines.__name__ + ".") and f.__module__ not in own]


def test_every_builder_is_covered():
    assert len(builders()) > 40
    for f in builders():
        missing = [p for p in inspect.signature(f).parameters if p not in ARGS]
        assert not missing, f"{f.__name__}: add {missing} to ARGS"


@pytest.mark.parametrize("builder", builders(), ids=lambda f: f.__name__)
def test_no_simulator_in_any_command_line(builder):
    text = builder(**{p: ARGS[p] for p in inspect.signature(builder).parameters})
    assert isinstance(text, str) and text.strip()
    for word in SIM_WORDS:
        assert word not in text, f"{builder.__name__}: {text}"


def test_the_modules_name_no_simulator():
    modules = [cmdlines] + [importlib.import_module(f"{cmdlines.__name__}.{m.name}")
                            for m in pkgutil.iter_modules(cmdlines.__path__) if m.name not in OWN_TESTS]
    assert len(modules) > 5
    for module in modules:
        source = inspect.getsource(module)
        for word in SIM_WORDS + ("simulat",):
            assert word not in source, module.__name__


@pytest.mark.parametrize("cmd,expected", [
    (cmdlines.meminfo_once(), "cat /proc/meminfo"),
    # the station loop: the process list, the container's events and host memory on one channel
    (cmdlines.station_stream("glm53", 500, 2.0),
     "exec bash -c 'exec 3<> <(:); exec 4< <(exec nvidia-smi --query-compute-apps=gpu_uuid,pid,process_name,"
     "used_memory --format=csv,noheader,nounits -lms 500 2>&1); a=$!; exec 5< <(exec docker events --since 30s "
     "--filter container=glm53 --format '\"'\"'{{.Status}}|{{.Actor.Attributes.name}}|{{.Time}}'\"'\"' 2>&1); "
     "e=$!; trap \"kill -KILL $a $e 2>/dev/null; exit 129\" HUP INT TERM; drain() { while :; do IFS= read -r "
     "-t 0.01 -u \"$1\" l; s=$?; if [ $s = 0 ]; then printf \"%s %s\\n\" \"$2\" \"$l\"; elif [ $s -gt 128 ]; "
     "then [ -n \"$l\" ] && printf \"%s %s\\n\" \"$2\" \"$l\"; return 0; else [ -n \"$l\" ] && printf "
     "\"%s %s\\n\" \"$2\" \"$l\"; printf \"%s @@end\\n\" \"$2\"; return 1; fi; done; }; al=1; el=1; t=0; "
     "while :; do [ $al = 1 ] && { drain 4 A || al=0; }; [ $el = 1 ] && { drain 5 E || el=0; }; if [ $t = 0 ]; "
     "then while IFS= read -r l; do printf \"M %s\\n\" \"$l\"; done < /proc/meminfo; printf \"M @@\\n\"; fi; "
     "t=$(( (t + 1) % 8 )); read -t 0.25 -u 3 _; done'"),
    (cmdlines.rdma_counters("mlx5_0"),
     "cd /sys/class/infiniband/mlx5_0/ports/1/counters && grep -H . port_rcv_errors port_xmit_discards "
     "symbol_error link_error_recovery link_downed"),
    (cmdlines.read_file("~/glm53.env"), 'cat "$HOME"/glm53.env'),
    (cmdlines.read_file("/etc/dgx release"), "cat '/etc/dgx release'"),
    (cmdlines.model_config("/models/GLM-5.3-NVFP4/"), "cat /models/GLM-5.3-NVFP4/config.json"),
    (cmdlines.tail_file("~/x.log", 5), 'tail -n 5 "$HOME"/x.log'),
    # a wedged nvidia-smi ends station-side: a one-shot after its limit, a loop with its channel
    (cmdlines.gpu_index_names(), _locked("timeout -s KILL 10 nvidia-smi --query-gpu=index,name --format=csv,noheader")),
    (cmdlines.compute_apps_query(500),
     "exec sh -c 'nvidia-smi --query-compute-apps=gpu_uuid,pid,process_name,used_memory --format=csv,noheader,"
     "nounits -lms 500 & p=$!; trap \"kill -KILL $p 2>/dev/null; exit 129\" HUP INT TERM; wait \"$p\"'"),
    (cmdlines.run_launch_script("~/launch-glm53.sh", "~/.cache/dgx-console/launch-glm53.log"),
     'mkdir -p "$(dirname "$HOME"/.cache/dgx-console/launch-glm53.log)" && cd "$HOME" && '
     '(nohup bash "$HOME"/launch-glm53.sh > "$HOME"/.cache/dgx-console/launch-glm53.log 2>&1 < /dev/null & echo $!)'),
    # launch hazards over SSH and NCCL's own diagnostics, every argument quoted
    (cmdlines.loginctl_user("o'neil"), "loginctl show-user 'o'\"'\"'neil' -p Name -p UID -p Linger"),
    (cmdlines.logind_config(),
     "systemd-analyze cat-config systemd/logind.conf 2>/dev/null || for f in /etc/systemd/logind.conf "
     '/etc/systemd/logind.conf.d/*.conf; do [ -f "$f" ] && printf "# %s\\n" "$f" && cat "$f"; done; true'),
    (cmdlines.ncclras_diag("glm 53"), "docker exec 'glm 53' ncclras -D 2>&1"),
    # the health one-shot (older drivers' names too) and one rails round, builtins only
    (cmdlines.gpu_health_query(prefix="clocks_throttle_reasons"),
     _locked("timeout -s KILL 10 nvidia-smi --query-gpu=index,pci.bus_id,clocks_throttle_reasons.active,"
             "pcie.link.gen.current,pcie.link.gen.max,pcie.link.width.current,pcie.link.width.max,"
             "ecc.errors.uncorrected.volatile.total,retired_pages.pending,remapped_rows.pending,power.draw,"
             "enforced.power.limit,power.default_limit,clocks.sm,clocks.max.sm,utilization.gpu "
             "--format=csv,noheader,nounits") + " 2>&1"),
    (cmdlines.rails_once([("enp1s0f1np1", "")]),
     "bash -c 'r() { if IFS= read -r v 2>/dev/null < \"$2\"; then printf \"R %s %s\\n\" \"$1\" \"$v\"; else printf "
     "\"R %s -\\n\" \"$1\"; fi; }; r enp1s0f1np1.operstate /sys/class/net/enp1s0f1np1/operstate; "
     "r enp1s0f1np1.carrier /sys/class/net/enp1s0f1np1/carrier; r enp1s0f1np1.speed /sys/class/net/enp1s0f1np1/speed; "
     "r enp1s0f1np1.mtu /sys/class/net/enp1s0f1np1/mtu; "
     "r enp1s0f1np1.carrier_changes /sys/class/net/enp1s0f1np1/carrier_changes; "
     "r enp1s0f1np1.rx_errors /sys/class/net/enp1s0f1np1/statistics/rx_errors; "
     "r enp1s0f1np1.tx_errors /sys/class/net/enp1s0f1np1/statistics/tx_errors; "
     "r enp1s0f1np1.rx_dropped /sys/class/net/enp1s0f1np1/statistics/rx_dropped; "
     "r enp1s0f1np1.tx_dropped /sys/class/net/enp1s0f1np1/statistics/tx_dropped; printf \"R @@\\n\"'"),
])
def test_real_command_text(cmd, expected):
    assert cmd == expected
