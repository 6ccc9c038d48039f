"""NCCL's command lines: what NCCL chose (its log lines), nccl-tests over mpirun, and the hang
evidence (``py-spy`` of the engine processes, their kernel-side threads, the RAS report and watch, the
flight recorder's dump and its paths, NCCL's own cross-rank diagnostics)."""

from __future__ import annotations

import shlex

from console.remote.cmdlines.tasks import engine_tasks as _engine_tasks

q = shlex.quote


# Lines of a container log that say what NCCL chose (version, environment it read, network, GDR,
# interfaces, GIDs, warnings); the rest of a multi-GB log stays on the station.
NCCL_LOG_PATTERN = (r"NCCL version|using nccl==|set by environment|NET/IB|NET/Socket|Using network|Bootstrap ?:|"
                    r"NCCL WARN|GDRDMA|Init COMPLETE|localGid|Watchdog caught|NCCL DIAG")


ENGINE_PROCESS_PATTERN = "*python*|*vllm*|*VLLM*|*sglang*|*ray::*"


def nccl_log_lines(container: str, tail: int = 200000) -> str:
    return (f"docker logs --tail {int(tail)} {q(container)} 2>&1 | grep -E {q(NCCL_LOG_PATTERN)} | tail -n 400")


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
    """Every engine thread's state, wait channel and kernel stack (console/remote/cmdlines/tasks.py)."""
    return _engine_tasks(container, ENGINE_PROCESS_PATTERN)


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


# The flight recorder's files inside each container (console.service.engines.flight_recorder_env sets
# them at launch): torch writes rank R's dump to FLIGHT_RECORDER_DUMP + R and, when a byte is written
# to the fifo FLIGHT_RECORDER_PIPE + R + ".pipe", dumps there without stopping anything. One prefix
# for both, in /tmp (present in every image); whoever reads a dump derives the names from these.
FLIGHT_RECORDER_PREFIX = "/tmp/dgx-console-fr-"


FLIGHT_RECORDER_DUMP = FLIGHT_RECORDER_PREFIX + "rank_"


FLIGHT_RECORDER_PIPE = FLIGHT_RECORDER_PREFIX + "pipe_"


FLIGHT_RECORDER_ENTRIES = 2000  # collectives each rank keeps (overrides.flight_recorder; 0 = off)


#: What turns the flight recorder on with a pipe to ask for a dump, as the launch sets it: the words the
#: console shows an operator whose engine runs without it (the hang evidence, the next step) are made
#: of these, so that a hand launch asked for by the hint is read the same way as the console's own.
FLIGHT_RECORDER_ON = {"TORCH_NCCL_TRACE_BUFFER_SIZE": str(FLIGHT_RECORDER_ENTRIES),
                      "TORCH_NCCL_DEBUG_INFO_PIPE_FILE": FLIGHT_RECORDER_PIPE}
FLIGHT_RECORDER_ON_TEXT = " and ".join(f"{k}={v}" for k, v in FLIGHT_RECORDER_ON.items())


def ncclras_diag(container: str) -> str:
    """NCCL 2.31's cross-rank comparison (GPU model, driver, ECC, NVLink, ``NCCL_*``), read from the
    RAS service inside the serving container (the ncclras client ships with NCCL)."""
    return f"docker exec {q(container)} ncclras -D 2>&1"
