"""The one catalogue of log knowledge: finding ids (shared/reference/findings.md plus the ids listed in
docs/findings.md), the log signatures that raise them, the context facts that decide the transport
findings, and the markers the rest of the console derives from it: the launch's fatal lines
(``fatal_of_text``), the engine tracker's ready/started/reset/progress markers, the log pane's
highlight patterns.

Each signature names literal *anchors* (cheap substring probes run over a whole batch at once)
and an optional regex confirmed only on the few lines an anchor hit. Matching is on the message,
never the prefix, so vLLM, PyTorch, NCCL, Ray, SGLang, uvicorn and docker prefixes all pass.
Every regex here is linear in the line length: no nested quantifiers, possessive or bounded runs
where a run is followed by more pattern (log lines can be megabytes).

``rank`` orders causes: a lower rank is nearer the root (a link check or a missing device
explains a socket fallback, which explains a watchdog timeout, which explains a dead engine).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

SEVERITIES = ("error", "warning", "info")
SEVERITY_ORDER = {s: i for i, s in enumerate(SEVERITIES)}

# Rank bands (lower = nearer the root cause).
R_LINK = 0  # link checks: cable, MTU, RDMA port
R_SETUP = 5  # station setup differs between stations: image, env, NCCL build, checkpoint
R_ROOT = 10  # a failure that explains itself (OOM, port, bootstrap connect, IB completion error)
R_DEVICE = 20  # RDMA devices unusable in the container
R_FALLBACK = 25  # NCCL fell back to TCP sockets
R_PLACEMENT = 30  # Ray cannot place workers / degraded transport
R_SYMPTOM = 40  # a hang or timeout whose cause lies elsewhere
R_HANG_HINT = 45  # hang hints (shm broadcast waits)
R_DEAD = 50  # the engine died: point above
R_UNKNOWN = 90  # an error no entry explains: below every specific finding

# What the console itself can do next about a finding (the TUI says "press k ...", the CLI names the
# command). Keys of NEXT_STEPS.
NextStep = Literal["checks", "log", "restart"]
NEXT_STEPS: dict[str, tuple[str, str]] = {  # key -> (command-line wording, TUI wording)
    "checks": ("run `dgx-console check` and `dgx-console validate-rdma`",
               "press k to run the link checks and RDMA validation now"),
    "log": ("read the lines around the evidence (`dgx-console diagnose --station NAME`)",
            "press Enter to show the evidence line in its station's log"),
    "restart": ("then `dgx-console restart`", "then press R to restart the service"),
}


@dataclass(frozen=True)
class Spec:
    """What an id means and what to do about it."""

    id: str
    severity: str
    rank: int
    cause: str
    fix: str
    next: NextStep | None = None
    fatal: bool = False  # the start-up cannot succeed once this is seen (the launch stops waiting)


@dataclass(frozen=True)
class Hit:
    """A refinement of a signature match: sub-cause, severity or rank for this evidence line."""

    severity: str | None = None
    rank: int | None = None
    cause: str | None = None
    fix: str | None = None


# refine(match, text) -> Hit (override), None (keep defaults) or False (not a finding after all)
Refiner = Callable[[re.Match[str] | None, str], "Hit | None | bool"]

# Context roles: evidence a finding is only made of once the whole context is known (what NCCL
# chose, how many nodes, the profile); console.diagnosis.engine decides them in ranked().
Role = Literal["socket-announce", "socket-network", "socket-channel", "ib-disabled", "verbs-missing",
               "gdr-disabled", "capability"]


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
    role: Role | None = None  # contextual evidence (see Role) instead of a finding of its own
    flags: tuple[str, ...] = field(default=())


def _c(p: str, flags: int = 0) -> re.Pattern[str]:
    return re.compile(p, flags)


_ANSI = re.compile(r"\x1b\[[0-9;?]*+[ -/]*+[@-~]")


OOM_LOAD_FIX = ("the weights do not fit in this GPU's memory: more tensor parallelism (more stations/GPUs), a "
                "smaller quantization of the checkpoint, or free the GPU of other processes first")

SPECS: dict[str, Spec] = {s.id: s for s in (
    Spec("nccl-socket-fallback", "warning", R_FALLBACK,
         "NCCL moved tensors over TCP sockets, not RoCE/IB (slow, and a common cause of timeouts)",
         "give the container the RDMA devices (--device /dev/infiniband, --ulimit memlock=-1, or "
         "--privileged), set NCCL_IB_HCA to the right HCAs, check `ibdev2netdev`", next="checks"),
    Spec("nccl-ib-missing", "error", R_DEVICE,
         "the container cannot use verbs: libibverbs is missing or no RDMA device is visible",
         "use an image with libibverbs (rdma-core) and pass the devices in (--device /dev/infiniband "
         "or --privileged, --ulimit memlock=-1)", next="checks"),
    Spec("nccl-gdr-disabled", "info", R_PLACEMENT,
         "RDMA works but not GPUDirect (normal on GB10; a loss of bandwidth on GB300)",
         "check nvidia-peermem / dmabuf support (`lsmod | grep peermem`), NCCL_NET_GDR_LEVEL", next="checks"),
    Spec("nccl-ib-error", "error", R_ROOT,
         "RoCE transport errors between the peers",
         "check the RoCE v2 GID index on both ends (`show_gids`; usually 3, sometimes 5; "
         "NCCL_IB_GID_INDEX), the same MTU on both ends, cabling/port pairing", next="checks"),
    Spec("nccl-connect", "error", R_ROOT,
         "the NCCL bootstrap TCP connection between the stations failed",
         "firewall on the fabric interface, wrong NCCL_SOCKET_IFNAME, route (`ip route get PEER`)", next="checks"),
    Spec("nccl-timeout", "error", R_SYMPTOM,
         "a collective never finished (PyTorch NCCL watchdog timeout)",
         "early (SeqNum=1 / NumelIn=1): the transport never worked -> link checks and RDMA validation; "
         "later: hang under load -> NCCL version (>= 2.29.3 on aarch64, 2.30.7 pinned), "
         "NCCL_NVLS_ENABLE=0 with 2.30.4, the same NCCL build on both nodes", next="checks", fatal=True),
    Spec("nccl-hang", "warning", R_HANG_HINT,
         "processes stall without a watchdog timeout yet",
         "as nccl-timeout; `py-spy dump` both ranks; look at the other station's log", next="checks"),
    Spec("shm-too-small", "error", R_ROOT,
         "Docker's 64 MB /dev/shm ran out",
         "--ipc=host or --shm-size 16g", next="restart", fatal=True),
    Spec("gloo-interface", "warning", R_ROOT,
         "torch/Gloo bound the wrong interface (loopback or an unroutable address)",
         "set GLOO_SOCKET_IFNAME to a concrete interface name (not ^lo) on each node", fatal=True),
    Spec("cuda-oom", "error", R_ROOT,
         "GPU memory exhausted",
         "at run time: lower --gpu-memory-utilization (more room outside the KV cache for activations and "
         "graphs), --max-num-seqs / --max-num-batched-tokens, or --max-model-len; " + OOM_LOAD_FIX.replace(
             "the weights do not fit", "while loading weights, the weights do not fit"), fatal=True),
    Spec("kv-cache-too-small", "error", R_ROOT,
         "the KV cache cannot hold one max-length request",
         "lower --max-model-len (the log states the estimated max) or raise --gpu-memory-utilization", fatal=True),
    Spec("free-memory-at-startup", "error", R_ROOT,
         "less free GPU memory at startup than --gpu-memory-utilization asks for "
         "(GB10: the page cache lives in unified memory)",
         "drop the page cache (`sync; echo 3 > /proc/sys/vm/drop_caches`), lower the utilization, "
         "stop other GPU processes", fatal=True),
    Spec("state-cache-too-small", "error", R_ROOT,
         "the hybrid/linear-attention state cache limits or blocks requests",
         "lower --max-running-requests / --max-num-seqs rather than the context; --max-mamba-cache-size, "
         "--disable-radix-cache", fatal=True),
    Spec("smem-kernel-limit", "error", R_ROOT,
         "a kernel asks for more shared memory per block than the GPU allows (GB10: 101,376 bytes)",
         "use an image with the sm_12x tile override", fatal=True),
    Spec("mtp-weight-mismatch", "error", R_ROOT,
         "the MTP/NextN draft head loads into wrongly sized (NVFP4) slots",
         "drop the --speculative-* flags for this checkpoint", fatal=True),
    Spec("tool-parser-mismatch", "warning", R_ROOT,
         "tool calls will be lost silently: the glm45 tool parser does not match GLM-5.x output",
         "--tool-call-parser glm47", next="restart"),
    Spec("ray-version-mismatch", "error", R_ROOT,
         "Ray / Python differ between the nodes",
         "run the same image on every node", fatal=True),
    Spec("ray-resources", "warning", R_PLACEMENT,
         "Ray cannot place the workers",
         "VLLM_HOST_IP equal to `ray start --node-ip-address` on each node; `ray status`"),
    Spec("corrupt-checkpoint", "error", R_ROOT,
         "a checkpoint shard is truncated or differs",
         "compare per-file checksums on both stations; recopy the bad shard", next="checks", fatal=True),
    Spec("worker-died", "error", R_SYMPTOM,
         "a worker process exited during start or serving",
         "look above it for the root cause; exit -9 is often the host OOM killer "
         "(`journalctl -k | grep -i 'killed process'`)", next="log", fatal=True),
    Spec("engine-dead", "error", R_DEAD,
         "the engine died; the real cause is earlier in the log (or on the other station)",
         "look at the first error above it", next="log", fatal=True),
    Spec("port-in-use", "error", R_ROOT,
         "a port the engine needs is already taken",
         "stop the old container (`docker ps`, `ss -ltnp`) or pick another port", fatal=True),
    Spec("gated-dataset", "error", R_ROOT,
         "the benchmark data set is gated: the hub refused access",
         "accept the data set's terms on its hub page with the same account as the token"),
    # ---- ids added by issue 12 (listed in docs/findings.md)
    Spec("gpu-arch-unsupported", "error", R_ROOT,
         "the image's kernels or compiler do not know this GPU's architecture (GB10 is sm_121, GB300 "
         "sm_103): PyTorch, Triton or a kernel library was built without it",
         "use an image built for this GPU (CUDA 12.9/13 builds with sm_12x / sm_10x kernels, e.g. the profile's "
         "pinned image); for Triton's `ptxas` errors set TRITON_PTXAS_PATH to CUDA 13's /usr/local/cuda/bin/ptxas",
         next="restart", fatal=True),
    Spec("gpu-unavailable", "error", R_ROOT - 1,
         "the container cannot reach the GPU: no NVIDIA container runtime, or no GPU passed in",
         "install and configure the NVIDIA Container Toolkit (`nvidia-ctk runtime configure --runtime=docker`, "
         "restart docker) and start the container with --gpus / --runtime nvidia; "
         "`docker run --rm --gpus all ubuntu nvidia-smi` must list the GPU", next="checks", fatal=True),
    Spec("cuda-driver-too-old", "error", R_ROOT - 1,
         "the host's NVIDIA driver is older than the CUDA the image was built for",
         "update the host driver to one that supports the image's CUDA (12.8 needs >= 570, 13.0 >= 580; "
         "`nvidia-smi` shows the highest CUDA the driver supports), or use an image built for that CUDA",
         fatal=True),
    Spec("model-access-denied", "error", R_ROOT,
         "the hub refused the model download: the model is gated (licence not accepted), the token is "
         "missing or lacks access, or the repo id is wrong or private",
         "accept the licence on the model's hub page with the token's account; pass HF_TOKEN into the container "
         "on every station (-e HF_TOKEN, never on the command line); or point the model path at the local copy "
         "on both stations", fatal=True),
    Spec("max-model-len-too-large", "error", R_ROOT,
         "--max-model-len / --context-length is above what the model's config allows",
         "use the model's limit (in the log) or less; go above it only with RoPE scaling the model supports "
         "(VLLM_ALLOW_LONG_MAX_MODEL_LEN / SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN risk wrong output)",
         next="restart", fatal=True),
    Spec("cuda-illegal-access", "error", R_ROOT + 3,
         "a GPU kernel faulted (illegal memory access / launch failure): a bug in a kernel of this engine version "
         "or model path, or a failing GPU; the NCCL watchdog only reports it",
         "look for an Xid in the host's kernel log (`journalctl -k | grep -i xid`); to isolate it retry with "
         "--enforce-eager, without speculative decoding or custom kernels, CUDA_LAUNCH_BLOCKING=1; "
         "try the engine's current release", next="log", fatal=True),
    Spec("gpu-xid", "error", R_ROOT - 2,
         "the NVIDIA driver reported a GPU fault (Xid)",
         "see the Xid's meaning; reset the GPU or reboot the station before relaunching "
         "(`nvidia-smi -q | grep -i -A3 remapp`), and replace the GPU if it recurs", fatal=True),
    Spec("parser-error", "warning", R_ROOT,
         "the tool-call or reasoning parser crashed on the model's output: the affected replies lose their "
         "tool calls or reasoning",
         "use the parser that matches the model (`--tool-call-parser`, `--reasoning-parser`; GLM-5.x: glm47 / "
         "glm45) or an engine release with the parser fix", next="log"),
    Spec("dist-store-timeout", "error", R_ROOT + 1,
         "the torch.distributed rendezvous (TCPStore on the head) timed out: not every rank joined, or this "
         "rank cannot reach the head's store",
         "start every station and read the others' logs; the same --master-addr / --dist-init-addr and port "
         "on all stations, that port open on the fabric interface (vLLM 29501, SGLang 20000), "
         "GLOO_SOCKET_IFNAME set to the fabric interface", next="checks", fatal=True),
    Spec("nccl-version-mismatch", "error", R_SETUP + 1,
         "the stations run different NCCL versions",
         "run the same image (the same NCCL build) on every station; pin the profile's NCCL on all of them",
         next="checks"),
    Spec("checkpoint-shard-missing", "error", R_ROOT,
         "a checkpoint file the model needs is missing on this station (incomplete download or copy)",
         "compare the files with model.safetensors.index.json on both stations and recopy the missing shards",
         next="checks", fatal=True),
    Spec("unrecognised-error", "warning", R_UNKNOWN,
         "an error the catalogue does not know",
         "read the traceback or error on this station (its first lines are the evidence); search the engine's "
         "issue tracker for the message; `dgx-console bundle PATH` collects both stations' logs to share",
         next="log"),
)}

NEW_IDS = ("gpu-arch-unsupported", "gpu-unavailable", "cuda-driver-too-old", "model-access-denied",
           "max-model-len-too-large", "cuda-illegal-access", "gpu-xid", "parser-error", "dist-store-timeout",
           "nccl-version-mismatch", "checkpoint-shard-missing", "unrecognised-error")

# Finding ids that end a start-up (the launch stops waiting on them); transport findings do not: the
# transport is verified and reported on its own once the service is up.
FATAL_IDS = frozenset(i for i, s in SPECS.items() if s.fatal)
# A line that says "the engine died, root cause above": reported only when no cause shows up.
CONSEQUENCE_IDS = frozenset({"engine-dead"})

# Link/preflight check ids (reported by console.station.checks, not found in logs).
CHECK_RANKS: dict[str, int] = {
    **dict.fromkeys(("link-down", "link-speed", "mtu-value", "mtu-mismatch", "jumbo-ping", "rail-route",
                     "rdma-netdev", "rdma-port-down", "roce-gid", "rdma-errors", "rdma-bandwidth", "ssh-a-to-b",
                     "clock-skew", "clock-unsynced"), R_LINK),
    **dict.fromkeys(("env-mismatch", "image-mismatch", "checkpoint-mismatch", "user-mismatch",
                     "container-toolkit", "model-config"), R_SETUP),
    "disk-space": R_SETUP + 3,
    "api-exposed": 60,  # a security warning, unrelated to why serving failed
}

LINK_CHECK_FIX = "fix the link first"

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
            fix="run the link checks and RDMA validation; look at the other station's log for a socket "
                "fallback or an IB error",
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
    9: ("IBV_WC_REM_INV_REQ_ERR: the peer rejected the request (queue pair state or memory key; often after a "
        "local access violation on the HCA)", None, None),
    13: ("IBV_WC_RNR_RETRY_EXC_ERR: the receiver was not ready (peer stalled or died)", None, R_SYMPTOM),
}


def _ib_completion(m: re.Match[str] | None, text: str) -> Hit | None:
    if not m:
        return None
    code = int(m.group("code"))
    cause, fix, rank = _WC_STATUS.get(code, (f"IB completion error status {code}", None, None))
    return Hit(cause=f"RoCE completion error {code} ({cause})", fix=fix, rank=rank)


def _ib_async(m: re.Match[str] | None, text: str) -> Hit | None:
    event = (m.group("event").strip() if m else "") or "unknown event"
    low = event.lower()
    if "gid table change" in low or "port active" in low or "lid change" in low:
        return Hit(severity="warning", rank=R_ROOT + 5,
                   cause=f"the RDMA port reported '{event}' (an address or link change while NCCL ran)",
                   fix="keep the rail's address fixed while serving; if it flaps, check the cable and `ibstat`")
    if "catastrophic" in low or "fatal" in low:
        return Hit(cause=f"the HCA itself failed ('{event}'): a firmware or hardware fault on this station",
                   fix="reset the HCA (reboot the station), update its firmware; replace it if it recurs")
    return Hit(cause=f"the RDMA port reported link events ('{event}'): a flapping or faulty link",
               fix="check the cable and the port counters on both ends (`ibstat`, link_downed / "
                   "symbol_error in /sys/class/infiniband/*/ports/*/counters)")


def _modify_qp(m: re.Match[str] | None, text: str) -> Hit:
    why = m.group("why").strip() if m else ""
    return Hit(cause=f"the queue pair could not be connected (ibv_modify_qp: {why}): wrong RoCE GID index, "
                     "or the peer is unreachable over RoCE")


def _worker_exit(m: re.Match[str] | None, text: str) -> Hit | None:
    code = re.search(r"exit ?code(?:\s*:|=)?\s*(-?\d+)|exitcode\s*:\s*(-?\d+)", text)
    if not code:
        if "OOM killer" in text or "SIGKILL" in text:
            return Hit(rank=R_ROOT + 2, cause="a worker died unexpectedly; Ray names the host OOM killer "
                                              "(SIGKILL) as a likely cause",
                       fix="check `journalctl -k | grep -i 'killed process'` on that station; lower host memory "
                           "use (GB10: drop page cache before launch)")
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


def _profiled_tokens(m: re.Match[str] | None, text: str) -> Hit | bool:
    value = int(m.group("value")) if m else 0
    if value > 0:
        return False  # a smaller profiled pool than asked is SGLang's normal sizing, not a failure
    return Hit(cause=f"after the weights SGLang profiled {value:,} tokens of KV cache: nothing is left for it",
               fix="raise --mem-fraction-static, use more tensor parallelism, or a smaller quantization")


def _mamba(m: re.Match[str] | None, text: str) -> Hit | None:
    n = re.search(r"max_num_seqs \((\d+)\) exceeds available Mamba cache blocks \((\d+)\)", text)
    if n:
        return Hit(cause=f"--max-num-seqs ({int(n.group(1)):,}) is above the {int(n.group(2)):,} sequences the Mamba "
                         "state cache can hold", fix=f"--max-num-seqs {n.group(2)} (or less); the context need not shrink")
    return None


def _tool_parser(m: re.Match[str] | None, text: str) -> bool:
    return bool(re.search(r"glm-?5", text, re.I))


def _dataset_or_model(m: re.Match[str] | None, text: str) -> bool:
    """A hub refusal names a data set (gated-dataset) or a model (model-access-denied)."""
    return "/datasets/" in text or "cais/hle" in text or "dataset" in text.lower()


def _not_dataset(m: re.Match[str] | None, text: str) -> bool:
    return not _dataset_or_model(m, text)


def _max_len(m: re.Match[str] | None, text: str) -> Hit | bool:
    assert m is not None  # the signature has a pattern
    asked = m.group("asked")
    limit = re.search(r"derived (?:max_model_len|context_length) \((?:[\w=]+ or [\w=]+ in model's config\.json|"
                      r"\w+=)?(?P<n>\d+)", text)
    if "Target model's" in text:
        return False  # a draft model inheriting the target's context: SGLang handles it
    n = limit.group("n") if limit else None
    sev = None if ("ValueError" in text or "Value error" in text or "To allow overriding" in text
                   or not text.lstrip().startswith("Warning")) else "warning"
    return Hit(severity=sev,
               cause=f"the requested context ({int(asked):,} tokens) is above the model's limit"
                     + (f" ({int(n):,})" if n else ""),
               fix=(f"--max-model-len {n} (or --context-length {n}) or less; " if n else "")
               + "go above it only with RoPE scaling the model supports")


_XID = {  # Xid -> (meaning, fix); NVIDIA's Xid catalog
    13: ("graphics engine exception: a kernel faulted (usually a software bug, sometimes a bad GPU)",
         "see the engine's kernel error above; relaunch; if it recurs on one GPU only, test that GPU"),
    31: ("GPU memory page fault: a kernel touched an invalid address", None),
    43: ("GPU stopped processing: a channel was reset after a fault", None),
    45: ("preemptive cleanup after an earlier error", None),
    48: ("double-bit ECC error: GPU memory is failing", "reset the GPU; replace it if it recurs"),
    61: ("internal micro-controller breakpoint (driver/firmware)", "update the driver; reset the GPU"),
    62: ("internal micro-controller halt (driver/firmware)", "update the driver; reset the GPU"),
    63: ("ECC row remapping pending: the GPU needs a reset to retire bad memory", "reset the GPU or reboot"),
    64: ("ECC row remapping failed", "replace the GPU"),
    74: ("NVLink error", "reset the GPU; check the NVLink/NVSwitch fabric"),
    79: ("the GPU has fallen off the bus: power, thermal or PCIe failure", "reboot; check power and cooling"),
    92: ("high single-bit ECC error rate", "reset the GPU; watch it"),
    94: ("contained ECC error", "restart the application; reset the GPU"),
    95: ("uncontained ECC error", "reset the GPU (reboot)"),
    109: ("context switch timeout", None),
    119: ("GSP RPC timeout (GPU firmware)", "update the driver; reset the GPU or reboot"),
    120: ("GSP error (GPU firmware)", "update the driver; reset the GPU or reboot"),
    154: ("the driver asks for a GPU reset or reboot", "drain the station and reset the GPU or reboot"),
}


def _xid(m: re.Match[str] | None, text: str) -> Hit:
    if m is None or not m.groupdict().get("code"):
        return Hit(rank=R_ROOT - 3, cause="the GPU has fallen off the bus and no longer answers the driver: "
                                          "power, thermal or PCIe failure",
                   fix="reboot the station; check power, cooling and the GPU's seating; replace it if it recurs")
    code = int(m.group("code"))
    meaning, fix = _XID.get(code, (f"Xid {code}", None))
    if code in (144, 145, 146, 147, 148, 149, 150):
        meaning, fix = "NVLink / NVLink network error", "check the NVLink fabric; reset the GPU"
    return Hit(cause=f"the NVIDIA driver reported Xid {code} on this station: {meaning}", fix=fix,
               rank=R_ROOT - 3 if code in (48, 64, 79, 95) else None)


def _no_kernel_image(m: re.Match[str] | None, text: str) -> Hit | None:
    sm = re.search(r"sm_(\d+)a?", text)
    if sm and m is not None and "gpu-name" in text:
        return Hit(cause=f"the bundled ptxas does not know sm_{sm.group(1)}: Triton (or torch.compile) cannot "
                         "compile kernels for this GPU")
    return None



def _illegal(m: re.Match[str] | None, text: str) -> Hit | None:
    if "watchdog" in text.lower():
        return Hit(cause="a GPU kernel faulted (illegal memory access); the NCCL watchdog reported it and took the "
                         "process down: this is not a network timeout")
    return None


def _store(m: re.Match[str] | None, text: str) -> Hit | None:
    peer = re.search(r"connect to \(([^,()]+), (\d+)\)|connect to \[([^\]]+)\]:(\d+)", text)
    if peer:
        host, port = (peer.group(1), peer.group(2)) if peer.group(1) else (peer.group(3), peer.group(4))
        return Hit(cause=f"this rank cannot reach the head's rendezvous store at {host}:{port} (head not started, "
                         "wrong address, or a firewall)")
    joined = re.search(r"(\d+)/(\d+) (?:clients|workers) joined", text)
    if joined:
        return Hit(cause=f"the torch.distributed rendezvous timed out: only {joined.group(1)} of "
                         f"{joined.group(2)} ranks joined the head's store")
    return None


def _shm(m: re.Match[str] | None, text: str) -> Hit | None:
    if "attaching to shared memory" in text:
        return Hit(cause="NCCL believes two ranks share a host but one cannot see the other's /dev/shm segment: "
                         "separate containers without --ipc=host, or two stations with the same hostname",
                   fix="--ipc=host on every container; give each station its own hostname (or NCCL_HOSTID)")
    return None


def _oom(m: re.Match[str] | None, text: str) -> Hit | None:
    if "not enough GPU memory" in text and "load model" in text.lower():
        return Hit(cause="the model's weights do not fit in this GPU's memory", fix=OOM_LOAD_FIX)
    if "AlignedAllocator" in text:
        return Hit(cause="FlashInfer's workspace buffer is too small for this batch",
                   fix="lower --chunked-prefill-size / --max-running-requests, or raise "
                       "SGLANG_FLASHINFER_WORKSPACE_SIZE")
    return None


def _family(m: re.Match[str] | None, text: str) -> Hit:
    return Hit(severity="warning", rank=R_SETUP + 2,
               cause="NCCL read a malformed peer address or message size during bootstrap: the ranks most likely run "
                     "different NCCL versions (or different NCCL_* settings)",
               fix="compare the NCCL version and the NCCL_* environment on both stations; run the same image on all")


def _reasoning(m: re.Match[str] | None, text: str) -> Hit | None:
    if "Reasoning" in text or "reasoning" in text:
        return Hit(cause="the reasoning parser crashed on a request: that reply loses its reasoning/content split")
    return None


# ------------------------------------------------------------------ signatures

_CONNECT_ERR = r"(No route to host|Connection refused|Connection timed out|Network is unreachable|Software caused connection abort)"

SIGNATURES: tuple[Signature, ...] = (
    # --- transport selection: decided from the whole context (what NCCL chose, nodes, profile)
    Signature("nccl-socket-fallback", ("NET/Socket",), _c(r"NET/Socket ?: ?Using"), role="socket-announce"),
    Signature("nccl-socket-fallback", ("Using network Socket",), role="socket-network"),
    Signature("nccl-socket-fallback", ("NET/Socket",), _c(r"via NET/Socket"), role="socket-channel",
              cause="NCCL channels between the stations run over TCP sockets (via NET/Socket), not RoCE/IB"),
    Signature("nccl-socket-fallback", ("NCCL_IB_DISABLE set by environment to 1",), rank=R_FALLBACK - 1,
              role="ib-disabled",
              cause="NCCL_IB_DISABLE=1 is set in the container environment, so NCCL uses TCP sockets",
              fix="unset NCCL_IB_DISABLE (or set it to 0) in the launch environment"),
    Signature("nccl-ib-missing", ("Failed to open libibverbs",), _c(r"Failed to open libibverbs"), role="verbs-missing"),
    Signature("nccl-ib-missing", ("No device found",), _c(r"NET/IB ?: ?No device found"), role="verbs-missing",
              cause="verbs loaded but no RDMA device is visible in the container",
              fix="pass the devices in: --device /dev/infiniband (or --privileged), --ulimit memlock=-1; "
                  "check NCCL_IB_HCA against `ibdev2netdev`"),
    Signature("nccl-gdr-disabled", ("GPU Direct RDMA Disabled",), role="gdr-disabled"),
    # --- IB errors (NCCL 2.3 .. 2.30 wording) and link events
    Signature("nccl-ib-error", ("Got completion",),
              _c(r"Got completion (?:from peer \S+ )?with (?:error\s*|status\s*=\s*)(?:[A-Z_]+\()?(?P<code>\d+)"),
              refine=_ib_completion),
    Signature("nccl-ib-error", ("ibv_modify_qp failed",),
              _c(r"ibv_modify_qp failed with (?:error )?(?P<why>(?:\d+\s*)?[^,.]*+)"), refine=_modify_qp),
    Signature("nccl-ib-error", ("Got async event",), _c(r"Got async event ?: ?(?P<event>[^\[]*+)"),
              refine=_ib_async),
    # --- version differences between the ranks
    Signature("nccl-version-mismatch", ("is neither AF_INET",), _c(r"with family \d+ is neither AF_INET"),
              refine=_family),
    Signature("nccl-version-mismatch", ("essage truncated",),
              _c(r"[Mm]essage truncated ?: ?(?:received|receiving) \d+ bytes instead of \d+"), refine=_family),
    # --- bootstrap connect
    Signature("nccl-connect", ("socketPollConnect",),
              _c(r"socketPollConnect(?:: Connect to| poll\(\) failed| poll\(\) returned)"),
              cause="the NCCL bootstrap connection to the peer failed"),
    Signature("nccl-connect", ("socketPollConnect",),
              _c(r"connect returned " + _CONNECT_ERR), severity="warning", rank=R_ROOT + 5,
              cause="NCCL keeps retrying the bootstrap connection to the peer"),
    Signature("nccl-connect", ("> failed : ",), _c(r"Connect to \S++ failed\s*+:\s*+" + _CONNECT_ERR)),
    Signature("nccl-connect", ("no socket interface found",),
              cause="NCCL found no usable interface for its bootstrap socket",
              fix="set NCCL_SOCKET_IFNAME to the fabric interface (see `ip -o addr`)"),
    Signature("nccl-connect", ("Connection closed by remote peer", "remote process exited or there was a network error",
                               "remote process exiting prematurely", "remote process exting prematurely"),
              severity="warning", rank=R_SYMPTOM,
              cause="the peer closed the NCCL connection: the process on the other station likely died "
                    "-- look at its log",
              fix="find the first error on the other station"),
    Signature("nccl-connect", ("unhandled system error",), rank=R_SYMPTOM,
              cause="NCCL reported a system error; the NCCL WARN line above (or on the other station) names it",
              fix="run with NCCL_DEBUG=INFO on both stations and look for the first WARN"),
    # --- torch.distributed rendezvous / store (not NCCL's own sockets)
    Signature("dist-store-timeout", ("The client socket has",), _c(r"The client socket has timed out after"),
              refine=_store),
    Signature("dist-store-timeout", ("The client socket has",), _c(r"The client socket has failed to connect to"),
              severity="warning", rank=R_ROOT + 5, refine=_store,
              cause="the torch.distributed rendezvous (TCPStore) cannot reach the head yet"),
    Signature("dist-store-timeout", ("waiting for clients", "waiting for workers"),
              _c(r"Timed out after \d+ seconds waiting for (?:clients|workers)"), refine=_store),
    Signature("dist-store-timeout", ("via c10d key-value store",),
              _c(r"retr\w+ ncclUniqueId from \[\d+\] via c10d key-value store"),
              cause="this rank never got the NCCL id from rank 0 through the torch.distributed store: rank 0 did not "
                    "reach that point (it failed or is slow) or the store connection broke"),
    Signature("dist-store-timeout", ("DistStoreError",), _c(r"DistStoreError: wait timeout|DistStoreError: Socket Timeout")),
    # --- collectives that never finish
    Signature("nccl-timeout", ("Watchdog caught",), _c(r"Watchdog caught collective operation timeout"), refine=_watchdog),
    Signature("nccl-timeout", ("by watchdog at work", "Timeout at NCCL work"),
              _c(r"detected by watchdog at work: \d|Timeout at NCCL work: \d"), refine=_watchdog),
    Signature("nccl-hang", ("shared memory broadcast block",),
              cause="a process waited 60 s for the others (hung collective or a slow rank)"),
    Signature("nccl-hang", ("RPC call to",), _c(r"RPC call to \w+ timed out")),
    Signature("nccl-hang", ("watchdog got stuck",),
              cause="the PyTorch NCCL watchdog itself is stuck (a collective or CUDA call hangs)"),
    # --- GPU faults (before OOM and timeouts: they explain both)
    Signature("cuda-illegal-access", ("illegal memory access", "unspecified launch failure", "misaligned address",
                                      "illegal instruction"),
              _c(r"an illegal memory access was encountered|unspecified launch failure|CUDA error: misaligned address"
                 r"|CUDA error: an illegal instruction"),
              refine=_illegal),
    Signature("gpu-xid", ("NVRM: Xid",), _c(r"NVRM: Xid \([^)]*+\): (?P<code>\d+)"), refine=_xid),
    Signature("gpu-xid", ("NVRM",), _c(r"fallen off the bus"), refine=_xid),  # the driver's lines carry NVRM:
    Signature("gpu-xid", ("uncorrectable ECC error",), _c(r"uncorrectable ECC error encountered"),
              cause="the GPU's memory reported an uncorrectable ECC error (Xid 48/94/95 in the host's kernel log)"),
    # --- the GPU itself: architecture, runtime, driver
    Signature("gpu-arch-unsupported", ("no kernel image is available",), refine=_no_kernel_image),
    Signature("gpu-arch-unsupported", ("is not defined for option 'gpu-name'",),
              _c(r"Value 'sm_\w+' is not defined for option 'gpu-name'"), refine=_no_kernel_image),
    Signature("gpu-arch-unsupported", ("is not compatible with the current PyTorch installation",),
              _c(r"with CUDA capability sm_(?P<cap>\d+) is not compatible with the current PyTorch installation"),
              role="capability"),
    Signature("gpu-arch-unsupported", ("which is of cuda capability",),
              _c(r"which is of cuda capability (?P<major>\d+)\.(?P<minor>\d+)"), role="capability"),
    Signature("gpu-unavailable", ("could not select device driver",),
              _c(r"could not select device driver \"[^\"]*+\" with capabilities: \[\[gpu\]\]")),
    Signature("gpu-unavailable", ("Failed to infer device type", "No platform detected", "Found no NVIDIA driver",
                                  "No CUDA GPUs are available"),
              _c(r"Failed to infer device type|No platform detected, vLLM is running on UnspecifiedPlatform|"
                 r"Found no NVIDIA driver on your system|No CUDA GPUs are available")),
    Signature("cuda-driver-too-old", ("requirement error: unsatisfied condition",),
              _c(r"requirement error: unsatisfied condition: cuda>=(?P<v>[\d.]+)"),
              cause="the image needs a newer CUDA than the host driver offers (nvidia-container-cli refused to start it)"),
    Signature("cuda-driver-too-old", ("driver on your system is too old", "driver version is insufficient",
                                      "forward compatibility was attempted"),
              _c(r"NVIDIA driver on your system is too old|CUDA driver version is insufficient for CUDA runtime "
                 r"version|forward compatibility was attempted on non supported HW")),
    # --- shared memory
    Signature("shm-too-small", ("posix_fallocate failed",), _c(r"posix_fallocate failed")),
    Signature("shm-too-small", ("shared memory segment",),
              _c(r"Error while (?:creating|attaching to) shared memory segment"), refine=_shm),
    # --- gloo / torch interface
    Signature("gloo-interface", ("(local) address",), _c(r"Unable to resolve hostname to a \(local\) address")),
    Signature("gloo-interface", ("connectFullMesh failed",), _c(r"connectFullMesh failed"), severity="error"),
    Signature("gloo-interface", ("Unable to find address for",), severity="error"),
    # --- memory
    Signature("cuda-oom", ("out of memory", "not enough GPU memory", "Failed to allocate memory for"),
              _c(r"CUDA out of memory|OutOfMemoryError|CUDA error: out of memory|cudaErrorMemoryAllocation|"
                 r"not enough GPU memory|Failed to allocate memory for \w+ with size \d+"), refine=_oom),
    Signature("kv-cache-too-small", ("available KV cache memory",), _c(r"larger than the available KV cache memory"),
              refine=_kv_estimate),
    Signature("kv-cache-too-small", ("stored in KV cache",),
              _c(r"larger than the maximum number of tokens that can be stored in KV cache"), refine=_kv_estimate),
    Signature("kv-cache-too-small", ("No available memory for the cache blocks",)),
    Signature("kv-cache-too-small", ("Not enough memory",), _c(r"Not enough memory\. Please try to increase --mem-fraction-static"),
              fix="raise --mem-fraction-static or lower --context-length / --max-running-requests"),
    Signature("kv-cache-too-small", ("alloc_req_slots runs out of memory",),
              cause="SGLang's request-to-token pool has fewer slots than the running requests",
              fix="lower --max-running-requests (or raise --mem-fraction-static)"),
    Signature("kv-cache-too-small", ("is larger than the profiled value",),
              _c(r"is larger than the profiled value (?P<value>-?\d+)"), refine=_profiled_tokens),
    Signature("free-memory-at-startup", ("on startup is less than desired", "< desired utilization"),
              _c(r"on startup is less than desired|Free memory on \S+ \([\d./ ]+GiB\) < desired utilization")),
    Signature("state-cache-too-small", ("state cache is too small", "Mamba cache blocks"),
              _c(r"state cache is too small|max_num_reqs=0\b|exceeds available Mamba cache blocks"), refine=_mamba),
    Signature("state-cache-too-small", ("by the mamba state cache",),
              _c(r"capped to \d+ by the mamba state cache"), severity="warning",
              cause="the mamba state cache caps the running requests below the configured value"),
    Signature("smem-kernel-limit", ("Failed to set the allowed dynamic shared", "out of resource: shared memory"),
              _c(r"Failed to set the allowed dynamic shared|out of resource: shared memory")),
    Signature("mtp-weight-mismatch", ("The size of tensor a",),
              _c(r"The size of tensor a \(\d+\) must match the size of tensor b \(\d+\)"),
              needs_context=_c(r"load_weights|weight_loader|_mtp|nextn|NextN|MTP|drafter|speculative")),
    Signature("mtp-weight-mismatch", ("AssertionError",), _c(r"^\W*+AssertionError\s*+$"),
              needs_context=_c(r"(?:_mtp|nextn)\w*+\.py\", line \d++, in load_weights")),
    Signature("max-model-len-too-large", ("User-specified max_model_len", "User-specified context_length",
                                          "Target model's context_length"),
              _c(r"(?:User-specified|Target model's) (?:max_model_len|context_length) \((?P<asked>\d+)\) is greater "
                 r"than the derived"), refine=_max_len),
    # --- parsers
    Signature("tool-parser-mismatch", ("tool_call_parser", "tool-call-parser"),
              _c(r"tool[_-]call[_-]parser['\"]?\s*[:=]?\s*['\"]?glm45\b"), refine=_tool_parser),
    Signature("parser-error", ("Error in extracting tool call", "Error trying to handle streaming tool call",
                               "Error in chat_completion_full_generator", "Reasoning parsing error",
                               "Detector.__init__() got an unexpected keyword", "Failed to parse reasoning",
                               "Error in detect_and_parse"),
              refine=_reasoning),
    Signature("parser-error", ("tool_parser.py:", "reasoning_parser.py:", "_detector.py:"),
              _c(r"ERROR [^\[]*+\[\w*?(?:tool_parser|reasoning_parser|_detector)\.py:\d++\]"), refine=_reasoning),
    # --- ray
    Signature("ray-version-mismatch", ("Version mismatch",), _c(r"Version mismatch: The cluster was started with")),
    Signature("ray-resources", ("No available node types",), severity="error"),
    Signature("ray-resources", ("placement group",), _c(r"Waiting for creating a placement group")),
    Signature("ray-resources", ("Ray does not allocate any GPUs on the driver node",), severity="error",
              cause="the node vLLM's driver runs on has no GPU in Ray's placement group",
              fix="run `vllm serve` on a GPU node of the Ray cluster (the head with VLLM_HOST_IP set to its "
                  "`ray start --node-ip-address`); `ray status` must list every GPU"),
    Signature("ray-resources", ("exceeds the total number of available GPUs in the placement group",
                                "Current node has no GPU available"),
              severity="error", cause="Ray's cluster or placement group has fewer GPUs than the parallelism asks for",
              fix="start Ray on every station before `vllm serve` (`ray status` lists the GPUs); "
                  "--tensor-parallel-size x --pipeline-parallel-size must equal the GPUs Ray has"),
    # --- checkpoint
    Signature("corrupt-checkpoint", ("SafetensorError",)),  # "incomplete metadata" comes with it
    Signature("checkpoint-shard-missing", ("No such file or directory", "Cannot find any model weights"),
              _c(r"No such file or directory: ['\"][^'\"]*?\.(?:safetensors|bin|pt)['\"]|Cannot find any model weights")),
    # --- hub access
    Signature("model-access-denied", ("GatedRepoError", "gated repo", "is a gated", "is restricted",
                                      "Repository Not Found"),
              _c(r"GatedRepoError|Cannot access gated repo|trying to access a gated repo|Access to model \S+ is restricted"
                 r"|Repo model \S+ is gated|Repository Not Found for url"), refine=_not_dataset),
    Signature("gated-dataset", ("GatedRepoError", "is a gated", "gated dataset"),  # cais/hle lines say "gated" or "Error"
              _c(r"GatedRepoError|cais/hle|is a gated|gated (?:dataset|repo)"), refine=_dataset_or_model),
    Signature("gated-dataset", ("Client Error", "requires approval"),
              _c(r"Client Error: (?:Unauthorized|Forbidden) for url|requires approval|"
                 r"You must be authenticated to access it"),
              refine=lambda m, t: ("huggingface.co" in t or "hf.co" in t or "gated" in t.lower() or "approval" in t)
              and (_dataset_or_model(m, t) or "approval" in t)),
    Signature("model-access-denied", ("Client Error", "is restricted"),
              _c(r"Client Error: (?:Unauthorized|Forbidden) for url: https://huggingface\.co/(?!datasets/)"
                 r"|You must be authenticated to access it"), refine=_not_dataset),
    # --- processes
    Signature("worker-died", ("died unexpectedly", "died, exit code", "A worker died or was killed"),
              _c(r"(?:Worker|WorkerProc|worker|proc|Process|actor)\b.*?died|died unexpectedly|"
                 r"A worker died or was killed"), refine=_worker_exit),
    Signature("worker-died", ("unexpectedly failed", "the child failed"),
              _c(r"Child process unexpectedly failed|scheduler is dead|Received sigquit from a child process"),
              refine=_worker_exit),
    Signature("worker-died", ("memory pressure",), _c(r"killed due to memory pressure"), rank=R_ROOT + 2,
              cause="Ray killed workers because the host ran out of memory"),
    Signature("engine-dead", ("Engine core initialization failed", "EngineDeadError", "EngineCore encountered",
                              "EngineCore failed", "EngineCore hit an exception", "Engine process failed to start",
                              "Got fatal signal", "WorkerProc initialization failed", "Engine loop has died"),
              _c(r"Engine core initialization failed|EngineDeadError|EngineCore encountered a fatal error|"
                 r"EngineCore failed to start|EngineCore hit an exception|Engine process failed to start|"
                 r"Got fatal signal from worker processes|WorkerProc initialization failed due to an exception|"
                 r"Engine loop has died")),
    Signature("engine-dead", ("Scheduler hit an exception",),
              cause="the SGLang scheduler died; the real cause is in its traceback or above"),
    # --- ports
    Signature("port-in-use", ("ddress already in use",), _c(r"[Aa]ddress already in use")),  # torch's EADDRINUSE says it too
)

# anchor -> signatures, for the batch prefilter (an anchor may serve several signatures;
# a signature's regex then decides)
ANCHORS: dict[str, tuple[Signature, ...]] = {}
for _sig in SIGNATURES:
    for _a in _sig.anchors:
        ANCHORS[_a] = ANCHORS.get(_a, ()) + (_sig,)
ORDER: dict[Signature, int] = {s: i for i, s in enumerate(SIGNATURES)}

# per-source facts remembered for sub-causes (substring -> flag), found with one rfind per batch
FACTS = {
    "Init START": "init_start",
    "Init COMPLETE": "init_complete",
}

# ------------------------------------------------------------------ context probes
# Lines that change what a finding means, not findings themselves: which network NCCL chose, how many
# nodes, which NCCL version a host runs, whether weights are loading. anchor -> (fact, pattern).

CONTEXT_PROBES: tuple[tuple[str, str, re.Pattern[str]], ...] = (
    ("Using network", "network", _c(r"Using network (?P<v>\S+)")),
    ("] via ", "via", _c(r"via NET/(?P<v>[A-Za-z]+)(?:[\w]*+)(?:/\d+)?(?P<gdr>/GDRDMA)?")),
    ("] via ", "via_local", _c(r"via (?:P2P|SHM|NVLS|CollNet)")),
    ("nNodes", "nnodes", _c(r"nNodes (?P<v>\d+)")),
    ("NCCL version", "version", _c(r"NCCL version (?P<v>\d+\.\d+\.\d+)")),
    ("vLLM is using nccl==", "version", _c(r"using nccl==(?P<v>\d+\.\d+\.\d+)")),
    ("Starting to load model", "load_start", _c(r"Starting to load model")),
    ("Load weight begin", "load_start", _c(r"Load weight begin")),
    ("Loading safetensors checkpoint shards", "load_start", _c(r"Loading safetensors checkpoint shards:\s+\d")),
    ("Model loading took", "load_end", _c(r"Model loading took")),
    ("Load weight end", "load_end", _c(r"Load weight end")),
    ("cuda capability supported", "cap_range", _c(r"\(\d+\.\d+\) - \((?P<hi>\d+)\.(?P<him>\d+)\)")),
    ("supports CUDA capabilities", "cap_list", _c(r"supports CUDA capabilities (?P<v>(?:sm_\d+a? ?)++)")),
    ("GPU Direct RDMA", "gdr_on", _c(r"GPU Direct RDMA (?:\(DMABUF\) )?[Ee]nabled")),
)
CONTEXT_ANCHORS: dict[str, tuple[tuple[str, re.Pattern[str]], ...]] = {}
for _a, _fact, _pat in CONTEXT_PROBES:
    CONTEXT_ANCHORS[_a] = CONTEXT_ANCHORS.get(_a, ()) + ((_fact, _pat),)

# NCCL's host prefix `host:pid:tid [dev]` and Ray's `(Actor pid=N, ip=A)`: which host a line came from.
NCCL_HOST = _c(r"(?:^|[\s)|>])(?P<host>[\w.\-]++):\d++:\d++ \[\d++\]")
RAY_IP = _c(r"\(\w+ pid=\d+, ip=(?P<ip>[\d.]+)\)")

# ------------------------------------------------------------------ errors no entry explains
# Anchors that make a line worth a closer look for an error the catalogue does not know; the
# regexes below decide. A line any signature matched is never "unrecognised".

GENERIC_ANCHORS = ("Error", "ERROR", "CRITICAL", "Traceback (most recent call last)", "NCCL WARN",
                   "Exception", "exited with code", "exit code", "exitcode", "Segmentation fault",
                   "Fatal Python error", "terminate called after throwing")
_TYPE = (r"(?<![\w.])(?P<type>(?:[A-Za-z_]\w*+\.)*+(?:[A-Z]\w*?(?:Error|Exception)|Exception|KeyboardInterrupt"
         r"|SystemExit))")
EXCEPTION_LINE = _c(_TYPE + r"(?:\s*+:\s*+(?P<msg>\S.*)|\s*+$)")
# a level token where log formats put it: vLLM "ERROR 04-08 19:59:10 ...", uvicorn "ERROR:    ...",
# logging "- ERROR - ...", "[ERROR] ...", aligned columns "ERROR    ..."
LEVEL_LINE = _c(r"(?<![\w='\"\-])(?P<level>ERROR|CRITICAL|FATAL)(?:\s++\d\d-\d\d |:\s++|\s++-\s++|\]\s*+|\s{2,}+)"
                r"(?P<msg>\S.*)")
NCCL_WARN_LINE = _c(r"NCCL WARN (?P<msg>\S.*)")
EXIT_LINE = _c(r"exited with code (?P<code>-?\d+)|\bexit ?code\s*+[:=]?\s*+(?P<code2>-?\d+)|"
               r"\bexitcode\s*+:\s*+(?P<code3>-?\d+)")
CRASH_LINE = _c(r"Segmentation fault|core dumped|Fatal Python error: (?P<msg>.*)|terminate called after throwing "
                r"an instance of '(?P<cxx>[^']*+)'")
TRACEBACK = "Traceback (most recent call last)"
# the parts of a traceback that are not the error itself: frames, source lines, carets
FRAME = _c(r"^\s*+(?:File \"|\^|~|at |frame #|\.\.\.|raise |return |\w+ = )|^\s++\S")
RAY_REPEATED = _c(r"\s*\[repeated (?P<n>\d+)x across cluster\]\s*$")

# ------------------------------------------------------------------ markers the rest of the console uses

# Ready = the API serves (vLLM: uvicorn's line; SGLang says so itself).
READY_MARKERS = {
    "vllm": "Application startup complete.",
    "sglang": "The server is fired up and ready to roll!",
}
# The first line a started rank prints: proof its process came up (a worker waits for the head).
STARTED_MARKERS = {
    ("vllm", True): "vLLM API server version",
    ("vllm", False): "headless multiproc executor",
    ("sglang", True): "server_args=ServerArgs(",
    ("sglang", False): "server_args=ServerArgs(",
    ("vllm-ray", True): "Ray runtime started",
    ("vllm-ray", False): "",  # a Ray worker can only join once the head runs: nothing to wait for
}
# Lines that start a new run of the container: the phase starts over.
RESET_MARKERS = ("Launching vLLM", "vLLM API server version", "server_args=ServerArgs")
# Start-up phases in the order they happen: (phase, literal marker); the tracker's regexes for the
# numbers (load percentage, GiB) live with it.
PHASE_MARKERS: tuple[tuple[str, str], ...] = (
    ("loading", "Starting to load model"),
    ("loading", "Load weight begin"),
    ("loading", "Loading safetensors checkpoint shards"),
    ("loaded", "Model loading took"),
    ("loaded", "Load weight end"),
    ("kv-cache", "Available KV cache memory"),
    ("kv-cache", "KV Cache is allocated"),
    ("graphs", "Capturing CUDA graphs"),
    ("graphs", "Capture cuda graph begin"),
    ("graphs-done", "Graph capturing finished"),
    ("graphs-done", "Capture cuda graph end"),
)
FATAL_ANCHORS: tuple[str, ...] = tuple(dict.fromkeys(
    a for s in SIGNATURES if s.role is None and SPECS[s.id].fatal for a in s.anchors))


def signature_hits(text: str, anchors: tuple[str, ...] | None = None) -> list[tuple[Signature, Hit | None]]:
    """Signatures (not context roles) that match one cleaned line, in catalogue order, one per id."""
    sigs: list[Signature] = []
    for a in anchors if anchors is not None else ANCHORS:
        if a in text:
            sigs.extend(s for s in ANCHORS[a] if s not in sigs)
    out: list[tuple[Signature, Hit | None]] = []
    seen: set[str] = set()
    for sig in sorted(sigs, key=ORDER.__getitem__):
        if sig.role is not None or sig.id in seen or sig.needs_context is not None:
            continue
        m = sig.pattern.search(text) if sig.pattern is not None else None
        if sig.pattern is not None and m is None:
            continue
        hit = sig.refine(m, text) if sig.refine else None
        if hit is False:
            continue
        seen.add(sig.id)
        out.append((sig, hit if isinstance(hit, Hit) else None))
    return out


def fatal_of_text(text: str) -> tuple[str, str] | None:
    """(finding id, fix) when this one line means the start-up cannot succeed, else None.

    The launch's fatal-line list and the engine tracker's fatal markers: the catalogue's signatures of
    the ids whose spec is ``fatal``, at error severity."""
    if not any(a in text for a in FATAL_ANCHORS):
        return None
    if "\x1b" in text:
        text = _ANSI.sub("", text)
    for sig, hit in signature_hits(text, FATAL_ANCHORS):
        spec = SPECS[sig.id]
        severity = (hit and hit.severity) or sig.severity or spec.severity
        if spec.fatal and severity == "error":
            return sig.id, (hit and hit.fix) or sig.fix or spec.fix
    return None


# ------------------------------------------------------------------ log highlighting
# (pattern, class) for the log pane; classes: prefix, transport, ready, warning, error. Linear-time:
# literal alternations, bounded classes, possessive runs.

def _literals(words) -> str:
    return "|".join(re.escape(w) for w in sorted(set(words), key=len, reverse=True))


HIGHLIGHTS: tuple[tuple[re.Pattern[str], str], ...] = (
    (_c(r"^\(\w++ pid=\d++\)|^\[\d{4}-\d\d-\d\d [\d:]++ TP\d++\]"), "prefix"),
    (_c(r"via NET/IB\w*+/\d++(?:/GDRDMA)?|GPU Direct RDMA (?:\(DMABUF\) )?\w++"), "transport"),
    (_c(_literals((*READY_MARKERS.values(), "Init COMPLETE"))), "ready"),
    (_c(r"\b(?:WARNING|WARN)\b|via NET/Socket\S*+|Using network Socket"), "warning"),
    (_c(r"\b(?:ERROR|CRITICAL|FATAL)\b|" + re.escape(TRACEBACK) + r"|" + _TYPE + r"|"
        r"\[E\d{3,4}[ \]]|" + _literals(FATAL_ANCHORS + ("NCCL WARN", "timed out", "failed"))), "error"),
)
