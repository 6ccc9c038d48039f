"""The finding catalogue: one entry per stable id (shared/reference/findings.md) and the log
signatures that raise it.

Each signature names literal *anchors* (cheap substring probes run over a whole batch at once)
and an optional regex confirmed only on the few lines an anchor hit. Matching is on the message,
never the prefix, so vLLM, PyTorch, NCCL, Ray, SGLang, uvicorn and docker prefixes all pass.

``rank`` orders causes: a lower rank is nearer the root (a link check or a missing device
explains a socket fallback, which explains a watchdog timeout, which explains a dead engine).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

SEVERITIES = ("error", "warning", "info")
SEVERITY_ORDER = {s: i for i, s in enumerate(SEVERITIES)}

# Rank bands (lower = nearer the root cause).
R_LINK = 0  # link checks: cable, MTU, RDMA port
R_SETUP = 5  # station setup checks: image, env, checkpoint differ
R_ROOT = 10  # a failure that explains itself (OOM, port, bootstrap connect, IB completion error)
R_DEVICE = 20  # RDMA devices unusable in the container
R_FALLBACK = 25  # NCCL fell back to TCP sockets
R_PLACEMENT = 30  # Ray cannot place workers / degraded transport
R_SYMPTOM = 40  # a hang or timeout whose cause lies elsewhere
R_HANG_HINT = 45  # hang hints (shm broadcast waits)
R_DEAD = 50  # the engine died: point above


@dataclass(frozen=True)
class Spec:
    """What an id means and what to do about it."""

    id: str
    severity: str
    rank: int
    cause: str
    fix: str


@dataclass(frozen=True)
class Hit:
    """A refinement of a signature match: sub-cause, severity or rank for this evidence line."""

    severity: str | None = None
    rank: int | None = None
    cause: str | None = None
    fix: str | None = None


# refine(match, text) -> Hit (override), None (keep defaults) or False (not a finding after all)
Refiner = Callable[[re.Match[str] | None, str], "Hit | None | bool"]


@dataclass(frozen=True, eq=False)  # identity hash: signatures are keys in hot-path dicts
class Signature:
    id: str
    anchors: tuple[str, ...]
    pattern: re.Pattern[str] | None = None
    severity: str | None = None
    rank: int | None = None
    cause: str | None = None
    fix: str | None = None
    refine: Refiner | None = None
    needs_context: re.Pattern[str] | None = None  # the traceback/preceding lines must match this
    flags: tuple[str, ...] = field(default=())


LINK_CHECK_FIX = "run `dgx-console check` and `dgx-console validate-rdma`; fix the link first"

SPECS: dict[str, Spec] = {s.id: s for s in (
    Spec("nccl-socket-fallback", "warning", R_FALLBACK,
         "NCCL moved tensors over TCP sockets, not RoCE/IB (slow, and a common cause of timeouts)",
         "give the container the RDMA devices (--device /dev/infiniband, --ulimit memlock=-1, or "
         "--privileged), set NCCL_IB_HCA to the right HCAs, check `ibdev2netdev`"),
    Spec("nccl-ib-missing", "error", R_DEVICE,
         "the container cannot use verbs: libibverbs is missing or no RDMA device is visible",
         "use an image with libibverbs (rdma-core) and pass the devices in (--device /dev/infiniband "
         "or --privileged, --ulimit memlock=-1)"),
    Spec("nccl-gdr-disabled", "info", R_PLACEMENT,
         "RDMA works but not GPUDirect (normal on GB10; a loss of bandwidth on GB300)",
         "check nvidia-peermem / dmabuf support (`lsmod | grep peermem`), NCCL_NET_GDR_LEVEL"),
    Spec("nccl-ib-error", "error", R_ROOT,
         "RoCE transport errors between the peers",
         "check the RoCE v2 GID index on both ends (`show_gids`; usually 3, sometimes 5; "
         "NCCL_IB_GID_INDEX), the same MTU on both ends, cabling/port pairing"),
    Spec("nccl-connect", "error", R_ROOT,
         "the NCCL bootstrap TCP connection between the stations failed",
         "firewall on the fabric interface, wrong NCCL_SOCKET_IFNAME, route (`ip route get PEER`)"),
    Spec("nccl-timeout", "error", R_SYMPTOM,
         "a collective never finished (PyTorch NCCL watchdog timeout)",
         "early (SeqNum=1 / NumelIn=1): the transport never worked -> link checks and RDMA validation; "
         "later: hang under load -> NCCL version (>= 2.29.3 on aarch64, 2.30.7 pinned), "
         "NCCL_NVLS_ENABLE=0 with 2.30.4, the same NCCL build on both nodes"),
    Spec("nccl-hang", "warning", R_HANG_HINT,
         "processes stall without a watchdog timeout yet",
         "as nccl-timeout; `py-spy dump` both ranks; look at the other station's log"),
    Spec("shm-too-small", "error", R_ROOT,
         "Docker's 64 MB /dev/shm ran out",
         "--ipc=host or --shm-size 16g"),
    Spec("gloo-interface", "warning", R_ROOT,
         "torch/Gloo bound the wrong interface (loopback or an unroutable address)",
         "set GLOO_SOCKET_IFNAME to a concrete interface name (not ^lo) on each node"),
    Spec("cuda-oom", "error", R_ROOT,
         "GPU memory exhausted",
         "lower --max-model-len, fewer concurrent sequences, lower --gpu-memory-utilization headroom"),
    Spec("kv-cache-too-small", "error", R_ROOT,
         "the KV cache cannot hold one max-length request",
         "lower --max-model-len (the log states the estimated max) or raise --gpu-memory-utilization"),
    Spec("free-memory-at-startup", "error", R_ROOT,
         "less free GPU memory at startup than --gpu-memory-utilization asks for "
         "(GB10: the page cache lives in unified memory)",
         "drop the page cache (`sync; echo 3 > /proc/sys/vm/drop_caches`), lower the utilization, "
         "stop other GPU processes"),
    Spec("state-cache-too-small", "error", R_ROOT,
         "the hybrid/linear-attention state cache limits or blocks requests",
         "lower --max-running-requests / --max-num-seqs rather than the context; --max-mamba-cache-size, "
         "--disable-radix-cache"),
    Spec("smem-kernel-limit", "error", R_ROOT,
         "a kernel asks for more shared memory per block than the GPU allows (GB10: 101,376 bytes)",
         "use an image with the sm_12x tile override"),
    Spec("mtp-weight-mismatch", "error", R_ROOT,
         "the MTP/NextN draft head loads into wrongly sized (NVFP4) slots",
         "drop the --speculative-* flags for this checkpoint"),
    Spec("tool-parser-mismatch", "warning", R_ROOT,
         "tool calls will be lost silently: the glm45 tool parser does not match GLM-5.x output",
         "--tool-call-parser glm47"),
    Spec("ray-version-mismatch", "error", R_ROOT,
         "Ray / Python differ between the nodes",
         "run the same image on every node"),
    Spec("ray-resources", "warning", R_PLACEMENT,
         "Ray cannot place the workers",
         "VLLM_HOST_IP equal to `ray start --node-ip-address` on each node; `ray status`"),
    Spec("corrupt-checkpoint", "error", R_ROOT,
         "a checkpoint shard is truncated or differs",
         "compare per-file checksums on both stations; recopy the bad shard"),
    Spec("worker-died", "error", R_SYMPTOM,
         "a worker process exited during start or serving",
         "look above it for the root cause; exit -9 is often the host OOM killer "
         "(`journalctl -k | grep -i 'killed process'`)"),
    Spec("engine-dead", "error", R_DEAD,
         "the engine died; the real cause is earlier in the log (or on the other station)",
         "look at the first error above it"),
    Spec("port-in-use", "error", R_ROOT,
         "a port the engine needs is already taken",
         "stop the old container (`docker ps`, `ss -ltnp`) or pick another port"),
    Spec("gated-dataset", "error", R_ROOT,
         "the benchmark data (or model) is gated: the hub refused access",
         "accept the terms on the hub page with the same account as the token"),
)}

# Link/preflight check ids (reported by console.checks, not found in logs).
CHECK_RANKS: dict[str, int] = {
    **dict.fromkeys(("link-down", "link-speed", "mtu-value", "mtu-mismatch", "jumbo-ping", "rail-route",
                     "rdma-netdev", "rdma-port-down", "roce-gid", "rdma-errors", "rdma-bandwidth", "ssh-a-to-b",
                     "clock-skew", "clock-unsynced"), R_LINK),
    **dict.fromkeys(("env-mismatch", "image-mismatch", "checkpoint-mismatch", "user-mismatch",
                     "container-toolkit", "model-config"), R_SETUP),
    "disk-space": R_SETUP + 3,
    "api-exposed": 60,  # a security warning, unrelated to why serving failed
}


def _c(p: str, flags: int = 0) -> re.Pattern[str]:
    return re.compile(p, flags)


# ------------------------------------------------------------------ refiners


def _watchdog(m: re.Match[str] | None, text: str) -> Hit | None:
    seq = re.search(r"SeqNum=(\d+)|watchdog at work: (\d+)|Timeout at NCCL work: (\d+)", text)
    numel = re.search(r"NumelIn=(\d+)", text)
    if not seq:
        return None
    n = int(next(g for g in seq.groups() if g))
    numel_in = int(numel.group(1)) if numel else None
    if n <= 10 or numel_in == 1:
        return Hit(
            cause=f"the first collectives never completed (SeqNum={n}"
                  + (f", NumelIn={numel_in}" if numel_in is not None else "")
                  + "): the transport between the stations never worked",
            fix="run the link checks and RDMA validation (`dgx-console check`, `dgx-console validate-rdma`); "
                "look at the other station's log for a socket fallback or an IB error",
        )
    return Hit(
        cause=f"a collective hung under load after {n} operations (SeqNum={n})",
        fix="NCCL version: >= 2.29.3 on aarch64 (2.30.7 pinned), NCCL_NVLS_ENABLE=0 with 2.30.4, "
            "the same NCCL build on both nodes; `py-spy dump` both ranks",
    )


_WC_STATUS = {
    12: ("IBV_WC_RETRY_EXC_ERR: the transport retry counter was exceeded -- the peers cannot talk "
         "RoCE (GID index, MTU, cabling)", None, None),
    4: ("IBV_WC_LOC_PROT_ERR: local protection error -- GPUDirect memory registration "
        "(nvidia-peermem / dmabuf)", "check nvidia-peermem / dmabuf; try NCCL_NET_GDR_LEVEL=LOC to confirm", None),
    5: ("IBV_WC_WR_FLUSH_ERR: work requests flushed after an earlier error on the queue pair",
        None, R_SYMPTOM),
    13: ("IBV_WC_RNR_RETRY_EXC_ERR: the receiver was not ready (peer stalled or died)", None, R_SYMPTOM),
}


def _ib_completion(m: re.Match[str] | None, text: str) -> Hit | None:
    if not m:
        return None
    code = int(m.group("code"))
    cause, fix, rank = _WC_STATUS.get(code, (f"IB completion error status {code}", None, None))
    return Hit(cause=f"RoCE completion error {code} ({cause})", fix=fix, rank=rank)


def _modify_qp(m: re.Match[str] | None, text: str) -> Hit:
    why = m.group("why").strip() if m else ""
    return Hit(cause=f"the queue pair could not be connected (ibv_modify_qp: {why}): wrong RoCE GID index, "
                     "or the peer is unreachable over RoCE")


def _worker_exit(m: re.Match[str] | None, text: str) -> Hit | None:
    code = re.search(r"exit ?code(?:\s*:|=)?\s*(-?\d+)|exitcode\s*:\s*(-?\d+)", text)
    if not code:
        return None
    n = int(code.group(1) or code.group(2))
    if n in (-9, 9, 137):
        return Hit(rank=R_ROOT + 2,
                   cause="a worker was killed with SIGKILL (exit -9): usually the host OOM killer",
                   fix="check `journalctl -k | grep -i 'killed process'` on that station; lower host memory use "
                       "(GB10: drop page cache before launch)")
    if n in (-6, 6, 134):
        return Hit(rank=R_DEAD, cause="a worker aborted (SIGABRT, exit -6): usually the NCCL watchdog or a "
                                      "fatal CUDA error took it down; the cause is above")
    if n in (-15, 15, 143):
        return Hit(rank=R_HANG_HINT,
                   cause="a worker was terminated (SIGTERM, exit -15): stopped by `docker stop` or by the "
                         "engine shutting down after another failure")
    return Hit(cause=f"a worker process exited with code {n}")


def _kv_estimate(m: re.Match[str] | None, text: str) -> Hit | None:
    est = re.search(r"estimated maximum model length is (\d+)", text)
    have = re.search(r"stored in KV cache \((\d+)\)", text)
    if est:
        return Hit(cause=f"the KV cache cannot hold one max-length request; the log estimates at most "
                         f"{int(est.group(1)):,} tokens fit",
                   fix=f"--max-model-len {est.group(1)} (or less), or raise --gpu-memory-utilization")
    if have:
        return Hit(cause=f"the KV cache holds only {int(have.group(1)):,} tokens, less than the max model len",
                   fix=f"--max-model-len {have.group(1)} (or less), or raise --gpu-memory-utilization")
    return None


def _tool_parser(m: re.Match[str] | None, text: str) -> bool:
    return bool(re.search(r"glm-?5", text, re.I))


def _gated(m: re.Match[str] | None, text: str) -> bool:
    return "huggingface.co" in text or "hf.co" in text or "gated" in text.lower() or "approval" in text


# ------------------------------------------------------------------ signatures

_CONNECT_ERR = r"(No route to host|Connection refused|Connection timed out|Network is unreachable|Software caused connection abort)"

SIGNATURES: tuple[Signature, ...] = (
    # --- transport selection
    Signature("nccl-socket-fallback", ("NET/Socket",), _c(r"NET/Socket ?: ?Using")),
    Signature("nccl-socket-fallback", ("Using network Socket",)),
    Signature("nccl-socket-fallback", ("NET/Socket",), _c(r"via NET/Socket"),
              cause="NCCL channels between the stations run over TCP sockets (via NET/Socket), not RoCE/IB"),
    Signature("nccl-socket-fallback", ("NCCL_IB_DISABLE set by environment to 1",), rank=R_FALLBACK - 1,
              cause="NCCL_IB_DISABLE=1 is set in the container environment, so NCCL uses TCP sockets",
              fix="unset NCCL_IB_DISABLE (or set it to 0) in the launch environment"),
    Signature("nccl-ib-missing", ("open libibverbs",), _c(r"Failed to open libibverbs")),
    Signature("nccl-ib-missing", ("No device found",), _c(r"NET/IB ?: ?No device found"),
              cause="verbs loaded but no RDMA device is visible in the container",
              fix="pass the devices in: --device /dev/infiniband (or --privileged), --ulimit memlock=-1; "
                  "check NCCL_IB_HCA against `ibdev2netdev`"),
    Signature("nccl-gdr-disabled", ("GPU Direct RDMA Disabled",)),
    # --- IB errors (NCCL 2.3 .. 2.30 wording)
    Signature("nccl-ib-error", ("Got completion",),
              _c(r"Got completion (?:from peer \S+ )?with (?:error\s*|status\s*=\s*)(?:[A-Z_]+\()?(?P<code>\d+)"),
              refine=_ib_completion),
    Signature("nccl-ib-error", ("ibv_modify_qp",),
              _c(r"ibv_modify_qp failed with (?:error )?(?P<why>(?:\d+\s*)?[^,.]*)"), refine=_modify_qp),
    # --- bootstrap connect
    Signature("nccl-connect", ("socketPollConnect",),
              _c(r"socketPollConnect(?:: Connect to| poll\(\) failed| poll\(\) returned)"),
              cause="the NCCL bootstrap connection to the peer failed"),
    Signature("nccl-connect", ("socketPollConnect",),
              _c(r"connect returned " + _CONNECT_ERR), severity="warning", rank=R_ROOT + 5,
              cause="NCCL keeps retrying the bootstrap connection to the peer"),
    Signature("nccl-connect", ("> failed : ",),
              _c(r"WARN .*Connect to \S+ failed\s*:\s*" + _CONNECT_ERR)),
    Signature("nccl-connect", ("no socket interface found",),
              cause="NCCL found no usable interface for its bootstrap socket",
              fix="set NCCL_SOCKET_IFNAME to the fabric interface (see `ip -o addr`)"),
    Signature("nccl-connect", ("The client socket has",), _c(r"The client socket has timed out after"),
              cause="the torch.distributed rendezvous (TCPStore) connection to the head timed out"),
    Signature("nccl-connect", ("The client socket has",), _c(r"The client socket has failed to connect to"), severity="warning",
              rank=R_ROOT + 5, cause="the torch.distributed rendezvous (TCPStore) cannot reach the head yet"),
    Signature("nccl-connect", ("waiting for clients",), _c(r"Timed out after \d+ seconds waiting for clients"),
              rank=R_SYMPTOM, cause="the torch.distributed rendezvous timed out: not every station joined",
              fix="start the worker station(s) and look at their logs; check the head address/port "
                  "(MASTER_ADDR, --dist-init-addr) and the firewall between the stations"),
    Signature("nccl-connect", ("Connection closed by remote peer", "remote process exited or there was a network error"),
              severity="warning", rank=R_SYMPTOM,
              cause="the peer closed the NCCL connection: the process on the other station likely died "
                    "-- look at its log",
              fix="find the first error on the other station"),
    Signature("nccl-connect", ("unhandled system error",), rank=R_SYMPTOM,
              cause="NCCL reported a system error; the NCCL WARN line above (or on the other station) names it",
              fix="run with NCCL_DEBUG=INFO on both stations and look for the first WARN"),
    # --- collectives that never finish
    Signature("nccl-timeout", ("Watchdog caught",), _c(r"Watchdog caught collective operation timeout"), refine=_watchdog),
    Signature("nccl-timeout", ("by watchdog at work", "Timeout at NCCL work"),
              _c(r"detected by watchdog at work|Timeout at NCCL work"), refine=_watchdog),
    Signature("nccl-hang", ("shared memory broadcast block",),
              cause="a process waited 60 s for the others (hung collective or a slow rank)"),
    Signature("nccl-hang", ("RPC call to",), _c(r"RPC call to \w+ timed out")),
    Signature("nccl-hang", ("watchdog got stuck",),
              cause="the PyTorch NCCL watchdog itself is stuck (a collective or CUDA call hangs)"),
    # --- shared memory
    Signature("shm-too-small", ("posix_fallocate",), _c(r"posix_fallocate failed")),
    Signature("shm-too-small", ("shared memory segment",), _c(r"Error while creating shared memory segment")),
    # --- gloo / torch interface
    Signature("gloo-interface", ("(local) address",), _c(r"Unable to resolve hostname to a \(local\) address")),
    Signature("gloo-interface", ("connectFullMesh",), _c(r"connectFullMesh failed"), severity="error"),
    Signature("gloo-interface", ("Unable to find address for",), severity="error"),
    # --- memory
    Signature("cuda-oom", ("out of memory",),
              _c(r"CUDA out of memory|OutOfMemoryError|CUDA error: out of memory|cudaErrorMemoryAllocation")),
    Signature("cuda-oom", ("not enough GPU memory",)),
    Signature("kv-cache-too-small", ("available KV cache memory",), _c(r"larger than the available KV cache memory"), refine=_kv_estimate),
    Signature("kv-cache-too-small", ("stored in KV cache",),
              _c(r"larger than the maximum number of tokens that can be stored in KV cache"), refine=_kv_estimate),
    Signature("kv-cache-too-small", ("No available memory for the cache blocks",)),
    Signature("kv-cache-too-small", ("Not enough memory",), _c(r"Not enough memory\. Please try to increase --mem-fraction-static"),
              fix="raise --mem-fraction-static or lower --context-length / --max-running-requests"),
    Signature("free-memory-at-startup", ("on startup is less than desired",)),
    Signature("state-cache-too-small", ("state cache is too small", "Mamba cache blocks"),
              _c(r"state cache is too small|max_num_reqs=0\b|exceeds available Mamba cache blocks")),
    Signature("state-cache-too-small", ("by the mamba state cache",),
              _c(r"capped to \d+ by the mamba state cache"), severity="warning",
              cause="the mamba state cache caps the running requests below the configured value"),
    Signature("smem-kernel-limit", ("allowed dynamic shared", "out of resource: shared memory"),
              _c(r"Failed to set the allowed dynamic shared|out of resource: shared memory")),
    Signature("mtp-weight-mismatch", ("The size of tensor a",),
              _c(r"The size of tensor a \(\d+\) must match the size of tensor b \(\d+\)"),
              needs_context=_c(r"load_weights|weight_loader|_mtp|nextn|NextN|MTP|drafter|speculative")),
    Signature("tool-parser-mismatch", ("glm45",),
              _c(r"tool[_-]call[_-]parser['\"]?\s*[:=]?\s*['\"]?glm45\b"), refine=_tool_parser),
    # --- ray
    Signature("ray-version-mismatch", ("Version mismatch",), _c(r"Version mismatch: The cluster was started with")),
    Signature("ray-resources", ("No available node types",), severity="error"),
    Signature("ray-resources", ("placement group",), _c(r"Waiting for creating a placement group")),
    # --- checkpoint
    Signature("corrupt-checkpoint", ("SafetensorError", "incomplete metadata")),
    # --- processes
    Signature("worker-died", ("died unexpectedly", "died, exit code"),
              _c(r"(?:Worker|WorkerProc|worker|proc|Process|actor)\b.*died|died unexpectedly"), refine=_worker_exit),
    Signature("worker-died", ("unexpectedly failed", "Received sigquit"),
              _c(r"Child process unexpectedly failed|scheduler is dead|Received sigquit from a child process"),
              refine=_worker_exit),
    Signature("worker-died", ("memory pressure",), _c(r"killed due to memory pressure"), rank=R_ROOT + 2,
              cause="Ray killed workers because the host ran out of memory"),
    Signature("engine-dead", ("Engine core initialization failed", "EngineDeadError", "EngineCore encountered",
                              "EngineCore failed",
                              "Got fatal signal", "WorkerProc initialization failed"),
              _c(r"Engine core initialization failed|EngineDeadError|EngineCore encountered a fatal error|"
                 r"EngineCore failed to start|Got fatal signal from worker processes|"
                 r"WorkerProc initialization failed due to an exception")),
    Signature("engine-dead", ("Scheduler hit an exception",),
              cause="the SGLang scheduler died; the real cause is in its traceback or above"),
    # --- ports
    Signature("port-in-use", ("already in use",), _c(r"[Aa]ddress already in use")),
    # --- hub access
    Signature("gated-dataset", ("GatedRepoError", "is a gated"), _c(r"GatedRepoError|cais/hle|is a gated|gated (?:dataset|repo)")),
    Signature("gated-dataset", ("Client Error", "requires approval", "must be authenticated"),
              _c(r"Client Error: (?:Unauthorized|Forbidden) for url|requires approval|"
                 r"You must be authenticated to access it"),
              refine=_gated),
)

# anchor -> signatures, for the batch prefilter (an anchor may serve several signatures;
# a signature's regex then decides)
ANCHORS: dict[str, tuple[Signature, ...]] = {}
for _sig in SIGNATURES:
    for _a in _sig.anchors:
        ANCHORS[_a] = ANCHORS.get(_a, ()) + (_sig,)
ORDER: dict[Signature, int] = {s: i for i, s in enumerate(SIGNATURES)}

# per-source facts remembered for sub-causes (substring -> flag)
FACTS = {
    "Init START": "init_start",
    "Init COMPLETE": "init_complete",
}
