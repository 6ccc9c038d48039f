"""Every remote command line in one place. Every argument that comes from config or the
operator goes through ``shlex.quote``; nothing else builds shell text."""

from __future__ import annotations

import shlex

from console.probes import docker as docker_probe
from console.probes import gpu_health
from console.probes import nvidia_smi as smi
from console.probes.rails import IB_COUNTERS, NET_LEAVES, NET_STATS
from console.remote import cmdlines_copy as copy  # noqa: F401  (the copy's command lines: cmdlines.copy.*)
from console.remote.cmdlines_batch import PartResult, in_one, split_parts  # noqa: F401  (their home)
from console.remote.cmdlines_identity import (  # noqa: F401 - who a station is: their one home
    MACHINE_ID,
    NET_ADDRESS,
    machine_id_read,
    neigh_json,
    rail_mac_read,
)

# the process list's command lines (who holds a GPU, and ending it), re-exported: this is their one home
from console.remote.cmdlines_processes import (  # noqa: F401
    CONTAINERS_MARK,
    IDENTITY_MARK,
    PROCESS_FIELDS,
    SIGNALS,
    identity_fingerprint,
    identity_words,
    process_details,
    process_identity,
    process_running,
    signal_if_same,
    signal_process,
)
from console.remote.cmdlines_tasks import engine_tasks as _engine_tasks

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


def gpu_query(loop_ms: int | None = None, limit_s: float = TOOL_LIMIT_S) -> str:
    """One line per GPU; with ``loop_ms`` one long-lived process prints a round per interval."""
    cmd = f"nvidia-smi {smi.GPU_QUERY} {smi.CSV_FORMAT}"
    if loop_ms:
        return ended_with_channel(cmd + f" -lms {int(loop_ms)}")
    return bounded(cmd, limit_s)


def compute_apps_query(loop_ms: int | None = None) -> str:
    cmd = f"nvidia-smi {smi.APPS_QUERY} {smi.CSV_FORMAT}"
    if loop_ms:
        return ended_with_channel(cmd + f" -lms {int(loop_ms)}")
    return bounded(cmd)


MEMINFO = "/proc/meminfo"

def meminfo_once() -> str:
    return f"cat {MEMINFO}"


def docker_inspect(container: str) -> str:
    return f"docker inspect --format {q(docker_probe.INSPECT_FORMAT)} {q(container)}"


def port_listeners(port: int) -> str:
    """Who listens on TCP ``port`` (console/probes/listeners.py): ``ss -ltnpH 'sport = :8000'``. ss names
    the process only to its owner and root; the filter is one argument, quoted."""
    return f"ss -ltnpH {q(f'sport = :{int(port)}')}"


def docker_events(container: str, since: str = "30s") -> str:
    """``--since`` replays the last few seconds (a duration on the station's own clock, so no
    skew): a start that lands between our ``docker inspect`` and the moment the subscription is
    live is not missed. A replayed event only costs one more inspect."""
    return (f"exec docker events --since {q(since)} --filter {q('container=' + container)} "
            f"--format {q(docker_probe.EVENTS_FORMAT)}")


def docker_logs(container: str, tail: int = 1000, follow: bool = True, since: str | None = None) -> str:
    """``--since`` (an RFC3339 time from a previous ``--timestamps`` line) resumes a followed log
    after the container restarts without repeating what was already shown."""
    parts = ["docker", "logs", "--timestamps"]
    if follow:
        parts.append("-f")
    if since:
        parts += ["--since", q(since)]
    else:
        parts += ["--tail", str(int(tail))]
    return "exec " + " ".join(parts) + " " + q(container) + " 2>&1"


def docker_start(container: str) -> str:
    return f"docker start {q(container)}"


def docker_stop(container: str, timeout_s: int = 30) -> str:
    return f"docker stop -t {int(timeout_s)} {q(container)}"


# --- launch / stop / restart ---

GPU_LIST_QUERY = bounded("nvidia-smi --query-gpu=index,uuid,name --format=csv,noheader")
IMAGE_DIGEST_FORMAT = "{{json .RepoDigests}}"


def gpu_list() -> str:
    """index, uuid, name of every GPU: the launch picks the serving one(s) by UUID or name."""
    return GPU_LIST_QUERY


def image_digests(image: str) -> str:
    """The repo digests of a local image (the launch pins the image by digest)."""
    return f"docker image inspect --format {q(IMAGE_DIGEST_FORMAT)} {q(image)}"


def docker_rm(container: str) -> str:
    """Remove a stopped container (the launch clears NAME-prev before keeping the last run there)."""
    return f"docker rm {q(container)}"


def docker_rename(container: str, new_name: str) -> str:
    """Keep the previous run (and its log, the evidence of what went wrong) under another name."""
    return f"docker rename {q(container)} {q(new_name)}"


# --- link checks and RDMA ---
RDMA_SYSFS = "/sys/class/infiniband"
RDMA_COUNTER_NAMES = ("port_rcv_errors", "port_xmit_discards", "symbol_error", "link_error_recovery", "link_downed")


def station_path(path: str) -> str:
    """A shell word for ``path`` on the station (``~/x`` -> the login user's home)."""
    if path == "~" or path.startswith("~/"):
        rest = path[2:]
        return '"$HOME"' + (("/" + q(rest)) if rest else "")
    return q(path)


def whoami() -> str:
    return "id -un"


def ethtool(iface: str) -> str:
    return f"ethtool {q(iface)}"


def ip_link(iface: str) -> str:
    return f"ip -o link show dev {q(iface)}"


def ip_addr4(iface: str) -> str:
    return f"ip -o -4 addr show dev {q(iface)}"


def route_get(peer: str) -> str:
    return f"ip route get {q(peer)}"


def jumbo_ping(iface: str, peer: str, payload: int, count: int = 3) -> str:
    """DF set (``-M do``): a too-small MTU anywhere on the path fails instead of fragmenting."""
    return f"ping -M do -s {int(payload)} -c {int(count)} -i 0.2 -W 1 -I {q(iface)} {q(peer)} 2>&1"


def ibdev2netdev() -> str:
    return "ibdev2netdev"


def rdma_link() -> str:
    return "rdma link show"


def ibv_devinfo(device: str) -> str:
    return f"ibv_devinfo -d {q(device)}"


def show_gids(device: str) -> str:
    return f"show_gids {q(device)}"


def rdma_counters(device: str, port: int = 1) -> str:
    d = station_path(f"{RDMA_SYSFS}/{device}/ports/{int(port)}/counters")
    return f"cd {d} && grep -H . {' '.join(RDMA_COUNTER_NAMES)}"


def clock_sync() -> str:
    return "chronyc tracking 2>/dev/null || timedatectl show -p NTPSynchronized --value"


def epoch() -> str:
    return "date +%s.%N"


def ssh_peer(peer: str, connect_timeout_s: int = 5) -> str:
    """Passwordless login from this station to ``peer`` as the same user, the way the launch
    scripts do it (BatchMode: a password or host-key prompt is a failure, never a hang). ``--``
    ends ssh's options: a peer like ``-oProxyCommand=...`` is a host name, never an option."""
    return f"ssh -o BatchMode=yes -o ConnectTimeout={int(connect_timeout_s)} -- {q(peer)} id -un"


def docker_image_id(image: str) -> str:
    return f"docker image inspect --format {q('{{.Id}} {{json .RepoDigests}}')} {q(image)}"


def docker_runtimes() -> str:
    return (f"docker info --format {q('{{json .Runtimes}}')} && "
            "{ command -v nvidia-ctk nvidia-container-runtime || true; }")


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


def _perftest_args(device: str, gid_index: int | None, extra: list[str] | None, port: int) -> list[str]:
    args = ["ib_write_bw", "-d", device, "-F", "--report_gbits", "-p", str(int(port))]
    if gid_index is not None:
        args += ["-x", str(int(gid_index))]
    args += list(extra or [])
    if any(a.startswith("--use_cuda") for a in args):
        # CUDA numbers GPUs fastest-first by default; nvidia-smi (whose index we pass) in PCI order.
        args = ["env", "CUDA_DEVICE_ORDER=PCI_BUS_ID"] + args
    return args


def perftest_server(device: str, gid_index: int | None, extra: list[str] | None = None, port: int = 18515) -> str:
    """Print the shell's pid (for a precise cleanup), then become the ib_write_bw server."""
    return "echo PID $$; exec " + " ".join(q(a) for a in _perftest_args(device, gid_index, extra, port))


def perftest_client(device: str, server_ip: str, gid_index: int | None, extra: list[str] | None = None,
                    port: int = 18515) -> str:
    args = _perftest_args(device, gid_index, extra, port) + [server_ip]
    return " ".join(q(a) for a in args) + " 2>&1"


def kill_pid(pid: int) -> str:
    return f"kill {int(pid)} 2>/dev/null; sleep 0.2; kill -9 {int(pid)} 2>/dev/null; true"


def pid_alive(pid: int) -> str:
    return f"kill -0 {int(pid)} 2>/dev/null && echo alive || echo gone"


def gpu_index_names() -> str:
    return bounded("nvidia-smi --query-gpu=index,name --format=csv,noheader")


# --- NCCL workbench (dgx-console doctor) ---
# Lines of a container log that say what NCCL chose (version, environment it read, network, GDR,
# interfaces, GIDs, warnings); the rest of a multi-GB log stays on the station.
NCCL_LOG_PATTERN = (r"NCCL version|using nccl==|set by environment|NET/IB|NET/Socket|Using network|Bootstrap ?:|"
                    r"NCCL WARN|GDRDMA|Init COMPLETE|localGid|Watchdog caught|NCCL DIAG")
ENGINE_PROCESS_PATTERN = "*python*|*vllm*|*VLLM*|*sglang*|*ray::*"


def docker_inspect_json(container: str) -> str:
    """The whole ``docker inspect`` object (Config.Env, Path/Args, Image, State)."""
    return f"docker inspect {q(container)}"


def nccl_log_lines(container: str, tail: int = 200000) -> str:
    return (f"docker logs --tail {int(tail)} {q(container)} 2>&1 | grep -E {q(NCCL_LOG_PATTERN)} | tail -n 400")


def ip_addrs4() -> str:
    """Every interface's IPv4 addresses (``N: IFACE    inet A/P ...``)."""
    return "ip -o -4 addr show"


def perftest_lat_server(device: str, gid_index: int | None, port: int) -> str:
    args = ["ib_write_lat", "-d", device, "-F", "-p", str(int(port))] + (
        ["-x", str(int(gid_index))] if gid_index is not None else [])
    return "echo PID $$; exec " + " ".join(q(a) for a in args)


def perftest_lat_client(device: str, server_ip: str, gid_index: int | None, port: int) -> str:
    args = ["ib_write_lat", "-d", device, "-F", "-p", str(int(port))] + (
        ["-x", str(int(gid_index))] if gid_index is not None else []) + [server_ip]
    return " ".join(q(a) for a in args) + " 2>&1"


def nccl_tests_binary() -> str:
    """Where all_reduce_perf is: on PATH, or where NVIDIA's NCCL playbook builds it."""
    return ('command -v all_reduce_perf 2>/dev/null || { f="$HOME/nccl-tests/build/all_reduce_perf"; '
            '[ -x "$f" ] && echo "$f"; } || true')


def nccl_tests_mpirun(ranks: list[tuple[str, dict[str, str]]], binary: str, test_args: list[str],
                      allow_root: bool = False) -> str:
    """One rank per station as NVIDIA's NCCL playbook runs it (``mpirun -H IP:1`` over SSH), each rank
    with its own station's NCCL environment (``env K=V`` per app context: mpirun's ``-x`` is global).
    SSH is strict (BatchMode, known hosts as configured): an unknown key fails instead of prompting."""
    parts = ["mpirun", "--mca", "plm_rsh_agent", "ssh -o BatchMode=yes -o ConnectTimeout=10",
             "--bind-to", "none", "-x", "LD_LIBRARY_PATH", "-x", "PATH"]
    if allow_root:
        parts.append("--allow-run-as-root")
    for i, (host, env) in enumerate(ranks):
        if i:
            parts.append(":")
        parts += ["-np", "1", "-H", f"{host}:1", "env"] + [f"{k}={v}" for k, v in env.items()]
        parts += [binary] + list(test_args)
    return "echo PID $$; exec " + " ".join(q(p) for p in parts) + " 2>&1"


def pyspy_dump_engines(container: str, native: bool = False) -> str:
    """``py-spy dump`` of every engine process of the container (host PIDs from ``docker top``): the
    host's py-spy when it has one (sudo -n if ptrace needs it), else the container's (by its own PID;
    ptrace there needs ``--cap-add SYS_PTRACE``). ``native``: C/C++/CUDA frames too (``--native``)."""
    dump = "py-spy dump --native" if native else "py-spy dump"
    script = (
        f"c={q(container)}; "
        'out=$(docker top "$c" -eo pid,args 2>&1) || { printf "%s\\n" "$out"; exit 3; }; '
        'printf "%s\\n" "$out" | { found=0; while read -r pid args; do '
        f'case "$args" in {ENGINE_PROCESS_PATTERN}) ;; *) continue;; esac; found=1; '
        'echo "=== PID $pid: $args"; '
        "if command -v py-spy >/dev/null 2>&1; then "
        f'{dump} --pid "$pid" 2>&1 || sudo -n {dump} --pid "$pid" 2>&1; '
        "else ns=$(awk '/^NSpid/{print $NF}' \"/proc/$pid/status\" 2>/dev/null); "
        f'docker exec "$c" {dump} --pid "${{ns:-$pid}}" 2>&1 || echo "NO-PY-SPY"; fi; '
        'done; [ "$found" = 1 ] || echo "NO-ENGINE-PROCESS"; }'
    )
    return "sh -c " + q(script)


def engine_tasks(container: str) -> str:
    """Every engine thread's state, wait channel and kernel stack (console/remote/cmdlines_tasks.py)."""
    return _engine_tasks(container, ENGINE_PROCESS_PATTERN)


def rdma_statistic(device: str, port: int = 1) -> str:
    return f"rdma statistic show link {q(f'{device}/{int(port)}')}"


def ethtool_stats(iface: str) -> str:
    return f"ethtool -S {q(iface)}"


def gpu_activity() -> str:
    return bounded("nvidia-smi --query-gpu=index,name,utilization.gpu,utilization.memory --format=csv,noheader,nounits")


def kernel_log_since(epoch: float) -> str:
    """The kernel log since ``epoch``: journald when readable, else the ring buffer (dmesg has no
    --since: the caller drops older dated lines)."""
    return (f"journalctl -k --no-pager -o short-iso --since @{int(epoch)} 2>&1 || "
            "dmesg --time-format iso 2>&1 || dmesg 2>&1")

# --- hang evidence (dgx-console hang-report, the evidence screen) ---
RAS_DEFAULT_ADDR = "localhost:28028"
FR_DUMP_MAX_BYTES = 8 * 1024 * 1024  # one rank's flight recorder dump, read back base64-encoded
FR_DEFAULT_TEMP_FILE = "/tmp/nccl_trace_rank_"  # torch's default TORCH_NCCL_DEBUG_INFO_TEMP_FILE

# Where ncclras is missing (pip-installed NCCL ships no client), the RAS protocol is plain text
# (NCCL user guide, RAS: "telnet or netcat can be used instead"): the same STATUS request from Python.
_RAS_PY = """import socket, sys
h, p = sys.argv[1], int(sys.argv[2])
try:
    s = socket.create_connection((h, p), 5)
except OSError as e:
    print("Connecting to %s:%d: %s" % (h, p, e.strerror or e))
    print("Failed to connect to the NCCL RAS service!")
    sys.exit(1)
s.settimeout(15)
s.sendall(b"CLIENT PROTOCOL 2\\nSTATUS\\n")
b = b""
while True:
    try:
        d = s.recv(65536)
    except OSError:
        break
    if not d:
        break
    b += d
t = b.decode("utf-8", "replace")
head, _, rest = t.partition("\\n")
sys.stdout.write(rest if head.startswith("SERVER PROTOCOL") else t)
"""


def ncclras_report(container: str, limit_s: int = 20) -> str:
    """NCCL's RAS report from inside the container (where NCCL runs; ``NCCL_RAS_ADDR`` from its
    environment): ``ncclras -f json`` (2.28.7+), else the text report, else the STATUS request over the
    socket from Python (``NO-NCCLRAS-CLIENT`` marks that). Bounded station-side."""
    script = (
        f'a="${{NCCL_RAS_ADDR:-{RAS_DEFAULT_ADDR}}}"; h="${{a%:*}}"; p="${{a##*:}}"; '
        'if command -v ncclras >/dev/null 2>&1; then '
        f'out=$(timeout {int(limit_s)} ncclras -h "$h" -p "$p" -f json 2>&1); '
        'case "$out" in *"Invalid format"*|*"invalid option"*|*"unrecognized option"*) '
        f'timeout {int(limit_s)} ncclras -h "$h" -p "$p" 2>&1;; *) printf "%s\\n" "$out";; esac; '
        'else echo NO-NCCLRAS-CLIENT; '
        f'timeout {int(limit_s)} python3 -c {q(_RAS_PY)} "$h" "$p" 2>&1 || true; fi'
    )
    return f"docker exec {q(container)} sh -c {q(script)}"


RAS_WATCH_EVERY_S = 4.0  # the continuous RAS watch: one read this often while an engine serves
RAS_WATCH_LIMIT_S = 3  # one watch read, bounded station-side (the RAS service answers in milliseconds)


def ncclras_watch(container: str) -> str:
    """One read of the continuous RAS watch (console/station/ras_monitor.py): the report above,
    bounded to RAS_WATCH_LIMIT_S a client (one short ``docker exec`` every RAS_WATCH_EVERY_S)."""
    return ncclras_report(container, RAS_WATCH_LIMIT_S)


def flight_recorder_dump(container: str, interval_s: float = 2.0) -> str:
    """Ask every rank of the container for a flight recorder dump without stopping anything (a line
    into each ``TORCH_NCCL_DEBUG_INFO_PIPE_FILE<rank>.pipe``), then print every dump file
    (``TORCH_FR_DUMP_TEMP_FILE`` / ``TORCH_NCCL_DEBUG_INFO_TEMP_FILE`` + rank) base64-encoded after
    ``=== FR PATH MTIME``. ``NO-FR-BUFFER``: the trace buffer is off; ``NO-FR-PIPE``: no dump pipe.
    A dump path that is a symlink is never followed (``=== FR-SYMLINK PATH`` says it was skipped)."""
    script = (
        '[ -n "${TORCH_NCCL_TRACE_BUFFER_SIZE:-${TORCH_FR_BUFFER_SIZE:-}}" ] || echo NO-FR-BUFFER; '
        'pipe="${TORCH_NCCL_DEBUG_INFO_PIPE_FILE:-}"; '
        f'dump="${{TORCH_FR_DUMP_TEMP_FILE:-${{TORCH_NCCL_DEBUG_INFO_TEMP_FILE:-{FR_DEFAULT_TEMP_FILE}}}}}"; '
        'if [ -n "$pipe" ]; then n=0; for f in "$pipe"*.pipe; do [ -p "$f" ] || continue; n=1; '
        'timeout 2 sh -c \'echo 1 > "$1"\' _ "$f"; done; '
        f'[ "$n" = 1 ] && sleep {max(0.5, float(interval_s)):g} || echo NO-FR-PIPE; else echo NO-FR-PIPE; fi; '
        'for f in "$dump"*; do if [ -L "$f" ]; then echo "=== FR-SYMLINK $f"; continue; fi; '
        '[ -f "$f" ] || continue; '
        'echo "=== FR $f $(stat -c %Y "$f" 2>/dev/null)"; '
        f'head -c {FR_DUMP_MAX_BYTES} "$f" | base64 | tr -d "\\n"; echo; done'
    )
    return f"docker exec {q(container)} sh -c {q(script)}"


def log_tail(container: str, lines: int = 200) -> str:
    """The last ``lines`` lines of the container's log (stdout and stderr), once."""
    return docker_logs(container, tail=lines, follow=False).removeprefix("exec ")


# --- the operator's own launch script (config launch_script) ---


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


# --- issue 19: NCCL launch facts (flight recorder paths, launch hazards over SSH, NCCL's own diagnostics)
# The flight recorder's files inside each container (console.service.engines.flight_recorder_env sets
# them at launch): torch writes rank R's dump to FLIGHT_RECORDER_DUMP + R and, when a byte is written
# to the fifo FLIGHT_RECORDER_PIPE + R + ".pipe", dumps there without stopping anything. One prefix
# for both, in /tmp (present in every image); whoever reads a dump derives the names from these.
FLIGHT_RECORDER_PREFIX = "/tmp/dgx-console-fr-"
FLIGHT_RECORDER_DUMP = FLIGHT_RECORDER_PREFIX + "rank_"
FLIGHT_RECORDER_PIPE = FLIGHT_RECORDER_PREFIX + "pipe_"
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


def ncclras_diag(container: str) -> str:
    """NCCL 2.31's cross-rank comparison (GPU model, driver, ECC, NVLink, ``NCCL_*``), read from the
    RAS service inside the serving container (the ncclras client ships with NCCL)."""
    return f"docker exec {q(container)} ncclras -D 2>&1"
# GPU and fabric health
HEALTH_EVERY_S = 2.0  # the health stream's interval (slower than the GPU loop; a fault shows within ~2 s)
RAILS_EVERY_S = 2.0  # the rails loop's interval
NET_SYSFS = "/sys/class/net"


def gpu_health_query(loop_ms: int | None = None, prefix: str = "clocks_event_reasons",
                     limit_s: float = TOOL_LIMIT_S) -> str:
    """Per-GPU health (console/probes/gpu_health.py); ``prefix``: ``clocks_event_reasons`` (R535+) or
    older drivers' ``clocks_throttle_reasons``. With ``loop_ms`` one long-lived process."""
    cmd = f"nvidia-smi {gpu_health.query(prefix)} {smi.CSV_FORMAT}"
    if loop_ms:  # 2>&1: an unknown field's complaint must reach the reader (it switches the names)
        return ended_with_channel(cmd + f" -lms {int(loop_ms)} 2>&1")
    return bounded(cmd, limit_s) + " 2>&1"


def _rail_reads(rails: list[tuple[str, str]]) -> str:
    reads: list[str] = []
    for netdev, device in rails:
        net = f"{NET_SYSFS}/{netdev}"
        reads += [f"r {q(netdev + '.' + leaf)} {q(f'{net}/{leaf}')}" for leaf in NET_LEAVES]
        reads += [f"r {q(netdev + '.' + s)} {q(f'{net}/statistics/{s}')}" for s in NET_STATS]
        if device:
            port = f"{RDMA_SYSFS}/{device}/ports/1"
            reads.append(f"r {q(netdev + '.ib.state')} {q(port + '/state')}")
            reads += [f"r {q(netdev + '.ib.' + c)} {q(f'{port}/hw_counters/{c}')}" for c in IB_COUNTERS]
    return "; ".join(reads)


def rails_once(rails: list[tuple[str, str]]) -> str:
    """One round of the rails loop (``status``, the links rung): ``R KEY VALUE`` lines, then ``R @@``."""
    script = ('r() { if IFS= read -r v 2>/dev/null < "$2"; then printf "R %s %s\\n" "$1" "$v"; '
              'else printf "R %s -\\n" "$1"; fi; }; ' + _rail_reads(rails) + '; printf "R @@\\n"')
    return "bash -c " + q(script)


# One channel for the three: the session's long-lived streams are few (transport.MAX_STREAMS) and the
# monitor already holds five. bash reads the health tool and the kernel log from process substitutions
# (their pids kept: both are killed when the channel hangs up, a wedged nvidia-smi too) and sysfs with
# builtins; each line goes out with its source's tag: ``H`` health row, ``K`` kernel log line, ``R``
# rails round line (``R @@`` ends a round), ``H @@end`` / ``K @@end``: that tool ended.
# Whole lines only: a line read in part when the short read timed out is carried (c4, c5) to the next
# round (an "Xid 79" in two pieces never reads as "Xid 7"). At most HEALTH_LINES_PER_ROUND lines per
# source and round: a kernel-log flood waits in its pipe, never starving the others ("K @@busy": behind).
HEALTH_LINES_PER_ROUND = 50
# The station loop's drain (below): every line as it comes, no per-round bound.
_DRAIN = ('drain() { while :; do IFS= read -r -t 0.01 -u "$1" l; s=$?; '
          'if [ $s = 0 ]; then printf "%s %s\\n" "$2" "$l"; elif [ $s -gt 128 ]; then '
          '[ -n "$l" ] && printf "%s %s\\n" "$2" "$l"; return 0; else [ -n "$l" ] && printf "%s %s\\n" "$2" "$l"; '
          'printf "%s @@end\\n" "$2"; return 1; fi; done; }; ')
_HEALTH_LOOP = (
    'exec 3<> <(:); exec 4< <(exec {health} 2>&1); h=$!; exec 5< <(exec {kernel} 2>&1); k=$!; '
    'trap "kill -KILL $h $k 2>/dev/null; exit 129" HUP INT TERM; '
    'r() { if IFS= read -r v 2>/dev/null < "$2"; then printf "R %s %s\\n" "$1" "$v"; '
    'else printf "R %s -\\n" "$1"; fi; }; '
    'c4=; c5=; '
    'drain() { local n=0 v=c$1 l s; while [ $n -lt {per_round} ]; do IFS= read -r -t 0.01 -u "$1" l; s=$?; '
    'l="${!v}$l"; printf -v "$v" %s ""; '
    'if [ $s = 0 ]; then printf "%s %s\\n" "$2" "$l"; n=$((n + 1)); elif [ $s -gt 128 ]; then '
    'if [ ${#l} -gt 65536 ]; then printf "%s %s\\n" "$2" "$l"; else printf -v "$v" %s "$l"; fi; return 0; '
    'else [ -n "$l" ] && printf "%s %s\\n" "$2" "$l"; printf "%s @@end\\n" "$2"; return 1; fi; done; '
    'printf "%s @@busy\\n" "$2"; }; '
    'hl=1; kl=1; t=0; while :; do '
    '[ $hl = 1 ] && { drain 4 H || hl=0; }; [ $kl = 1 ] && { drain 5 K || kl=0; }; '
    'if [ $t = 0 ]; then {rails}printf "R @@\\n"; fi; t=$(( (t + 1) % {ticks} )); read -t 0.5 -u 3 _; done'
)


def health_stream(rails: list[tuple[str, str]], since_epoch: float, prefix: str = "clocks_event_reasons",
                  interval_s: float = RAILS_EVERY_S) -> str:
    """The GPU health stream (``nvidia-smi -lms``), the kernel log (``journalctl -k -f`` since
    ``since_epoch``; a journal the user may not read says so on its first line) and the rails loop
    (link state, speed, MTU, carrier changes, error and RoCE counters from sysfs, every
    ``interval_s``), multiplexed on one channel by one bash: three long-lived processes, none per
    round. ``rails``: (netdev, RDMA device or "")."""
    health = f"nvidia-smi {gpu_health.query(prefix)} {smi.CSV_FORMAT} -lms {int(HEALTH_EVERY_S * 1000)}"
    kernel = f"journalctl -k -f --no-pager -o short-iso --since @{int(since_epoch)}"
    reads = _rail_reads(rails)
    script = (_HEALTH_LOOP.replace("{health}", health).replace("{kernel}", kernel)
              .replace("{rails}", reads + "; " if reads else "").replace("{ticks}", str(max(1, round(interval_s / 0.5))))
              .replace("{per_round}", str(HEALTH_LINES_PER_ROUND)))
    return "exec bash -c " + q(script)


# The station loop, the same way: the compute-apps loop (``A``), ``docker events`` (``E``) and
# /proc/meminfo every ``interval_s`` by builtins (``M`` lines, ``M @@`` ends one), polled every tick.
_STATION_LOOP = ('exec 3<> <(:); exec 4< <(exec {apps} 2>&1); a=$!; exec 5< <(exec {events} 2>&1); e=$!; '
                 'trap "kill -KILL $a $e 2>/dev/null; exit 129" HUP INT TERM; ' + _DRAIN +
                 'al=1; el=1; t=0; while :; do [ $al = 1 ] && { drain 4 A || al=0; }; '
                 '[ $el = 1 ] && { drain 5 E || el=0; }; if [ $t = 0 ]; then while IFS= read -r l; do '
                 'printf "M %s\\n" "$l"; done < ' + MEMINFO + '; printf "M @@\\n"; fi; '
                 't=$(( (t + 1) % {ticks} )); read -t {tick} -u 3 _; done')


def station_stream(container: str, loop_ms: int, interval_s: float = 2.0) -> str:
    """The station service's second channel: its process list, its container's events and its host
    memory multiplexed by one bash (two long-lived processes, none per round). The tick is half the
    GPU interval (0.05-0.5 s): a process line is never later than the list's horizon."""
    tick = min(0.5, max(0.05, loop_ms / 2000))
    apps = f"nvidia-smi {smi.APPS_QUERY} {smi.CSV_FORMAT} -lms {int(loop_ms)}"
    script = (_STATION_LOOP.replace("{apps}", apps).replace("{events}", docker_events(container)[len("exec "):])
              .replace("{ticks}", str(max(1, round(interval_s / tick)))).replace("{tick}", f"{tick:g}"))
    return "exec bash -c " + q(script)


