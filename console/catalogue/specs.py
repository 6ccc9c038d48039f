"""What each finding id means: severity, rank (how near the root cause), cause, fix, the console's next
step, and whether it ends a start-up. ``rank`` orders causes: a lower rank is nearer the root (a link
check or a missing device explains a socket fallback, which explains a watchdog timeout, which explains
a dead engine). Ids come from shared/reference/findings.md plus those listed in docs/findings.md.
"""

from __future__ import annotations

from dataclasses import dataclass
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

# What the console itself can do next about a finding (the TUI names the key, the CLI names the
# command). Keys of NEXT_STEPS. A timeout, a hang, an IB error or a failed connection goes to the NCCL
# workbench (the doctor's ladder: link, RDMA both ways, NCCL tests, hang evidence), not to the link
# checks: for a collective hang the link checks all pass, a dead end.
NextStep = Literal["checks", "log", "restart", "workbench"]
NEXT_STEPS: dict[str, tuple[str, str]] = {  # key -> (command-line wording, TUI wording)
    "checks": ("run `dgx-console check` and `dgx-console validate-rdma`",
               "press k to run the link checks and RDMA validation now"),
    "workbench": ("run `dgx-console doctor` (the NCCL workbench: link, RDMA both ways, NCCL tests, hang evidence)",
                  "press i to investigate in the NCCL workbench (link, RDMA both ways, NCCL tests, hang evidence)"),
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



OOM_HOLDERS = ("first see who else holds the GPU's memory: the process list (P in the console) shows each "
               "process with its user and container and ends a leftover one (t); then ")
OOM_LOAD_FIX = (OOM_HOLDERS + "if the weights still do not fit in this GPU's memory: more tensor parallelism (more "
                "stations/GPUs) or a smaller quantization of the checkpoint")

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
         "NCCL_IB_GID_INDEX), the same MTU on both ends, cabling/port pairing", next="workbench"),
    Spec("nccl-connect", "error", R_ROOT,
         "the NCCL bootstrap TCP connection between the stations failed",
         "firewall on the fabric interface, wrong NCCL_SOCKET_IFNAME, route (`ip route get PEER`)", next="workbench"),
    Spec("nccl-timeout", "error", R_SYMPTOM,
         "a collective never finished (PyTorch NCCL watchdog timeout)",
         "early (SeqNum=1 / NumelIn=1): the transport never worked -> link checks and RDMA validation; "
         "later: hang under load -> NCCL version (>= 2.29.3 on aarch64, 2.30.7 pinned), "
         "NCCL_NVLS_ENABLE=0 with 2.30.4, the same NCCL build on both nodes", next="workbench", fatal=True),
    Spec("nccl-hang", "warning", R_HANG_HINT,
         "processes stall without a watchdog timeout yet",
         "as nccl-timeout; `py-spy dump` both ranks; look at the other station's log", next="workbench"),
    Spec("shm-too-small", "error", R_ROOT,
         "Docker's 64 MB /dev/shm ran out",
         "--ipc=host or --shm-size 16g", next="restart", fatal=True),
    Spec("gloo-interface", "warning", R_ROOT,
         "torch/Gloo bound the wrong interface (loopback or an unroutable address)",
         "set GLOO_SOCKET_IFNAME to a concrete interface name (not ^lo) on each node", fatal=True),
    Spec("cuda-oom", "error", R_ROOT,
         "GPU memory exhausted",
         OOM_HOLDERS + "at run time: lower --gpu-memory-utilization (more room outside the KV cache for "
         "activations and graphs), --max-num-seqs / --max-num-batched-tokens, or --max-model-len; while loading "
         "weights that do not fit: more tensor parallelism or a smaller quantization", fatal=True),
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
    # ---- ids this repository added (listed in docs/findings.md)
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
    # ---- ids this repository added: the hub, Ray, the kernel log (listed in docs/findings.md)
    Spec("hub-unreachable", "error", R_ROOT,
         "the model's files are not on this station and the hub cannot be reached (no network, a proxy, or "
         "offline mode set) -- the download never happened",
         "copy the model to the same path on every station and point the model argument at that directory (or "
         "pre-download it with `huggingface-cli download`, then set HF_HUB_OFFLINE=1); if the station should reach "
         "the hub, check its DNS, proxy (HTTPS_PROXY) and firewall", next="log", fatal=True),
    Spec("ray-head-unreachable", "error", R_ROOT,
         "a Ray node cannot reach the head's GCS (the cluster's control store): the head is not running, the "
         "address or port is wrong, or a firewall blocks it",
         "start the head first (`ray start --head --port=6379`), join with `ray start --address=HEAD_IP:6379` using "
         "the head's fabric address, open the port between the stations, and run the same Ray version on both",
         next="checks", fatal=True),
    Spec("cuda-init-error", "error", R_ROOT - 1,
         "CUDA could not initialise the GPU in the container (the driver answered with an error code)",
         "check `nvidia-smi` on the host and in the container; reboot after a driver update; on NVSwitch systems "
         "start nvidia-fabricmanager with the driver's version", fatal=True),
    Spec("duplicate-gpu", "error", R_ROOT,
         "two ranks were given the same GPU (NCCL: 'Duplicate GPU detected')",
         "give each rank its own GPU: one GPU per station -> one rank per station; check CUDA_VISIBLE_DEVICES / "
         "--gpus and that no second engine runs in the same container", fatal=True),
    Spec("tp-not-divisible", "error", R_ROOT,
         "the tensor-parallel size does not divide the model's attention heads (or another sharded dimension)",
         "use a --tensor-parallel-size that divides the head count the log states (combine with "
         "--pipeline-parallel-size to use the remaining GPUs)", next="restart", fatal=True),
    Spec("model-type-unsupported", "error", R_ROOT,
         "the engine's libraries do not know this model's architecture (Transformers or the engine is older than "
         "the model)",
         "use an engine image released after the model (a newer vLLM/SGLang with its Transformers); do not only "
         "upgrade Transformers inside an older engine", next="restart", fatal=True),
    Spec("host-oom-kill", "error", R_ROOT - 1,
         "the host's kernel OOM killer killed a process: the station ran out of host memory",
         "lower host memory use: fewer CPU-side copies while loading (safetensors load, --swap-space 0, "
         "--cpu-offload-gb 0), drop the page cache on GB10 (unified memory), stop other processes",
         next="restart", fatal=True),
    Spec("rdma-memreg-failed", "error", R_DEVICE - 1,
         "RDMA memory registration failed (ibv_reg_mr / mkey): the locked-memory limit (memlock) is too low in "
         "the container, or the HCA ran out of registration resources",
         "start the container with --ulimit memlock=-1 (and `ulimit -l` = unlimited inside it), or raise the host's "
         "memlock limit in /etc/security/limits.conf; check nvidia-peermem / dmabuf for GPU memory", next="checks"),
    Spec("unrecognised-error", "warning", R_UNKNOWN,
         "an error the catalogue does not know",
         "read the traceback or error on this station (its first lines are the evidence); search the engine's "
         "issue tracker for the message; `dgx-console bundle PATH` collects both stations' logs to share",
         next="log"),
)}

NEW_IDS = ("gpu-arch-unsupported", "gpu-unavailable", "cuda-driver-too-old", "model-access-denied",
           "max-model-len-too-large", "cuda-illegal-access", "gpu-xid", "parser-error", "dist-store-timeout",
           "nccl-version-mismatch", "checkpoint-shard-missing", "unrecognised-error",
           "hub-unreachable", "ray-head-unreachable", "cuda-init-error", "duplicate-gpu", "tp-not-divisible",
           "model-type-unsupported", "host-oom-kill", "rdma-memreg-failed")

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
    "api-port": R_SETUP,  # another server on the API port: the engine cannot bind, or we talk to it
    "api-exposed": 60,  # a security warning, unrelated to why serving failed
}

LINK_CHECK_FIX = "fix the link first"
