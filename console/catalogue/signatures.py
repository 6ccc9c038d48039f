"""The log signatures that raise findings, the context probes that decide what some of them mean,
and the patterns that tell an error no entry explains.

Each signature names literal *anchors* (cheap substring probes run over a whole batch at once, see
``console.catalogue.classify``) and an optional regex confirmed only on the few lines an anchor hit.
Matching is on the message, never the prefix, so vLLM, PyTorch, NCCL, Ray, SGLang, uvicorn and docker
prefixes all pass. Every regex here is linear in the line length: no nested quantifiers, possessive or
bounded runs where a run is followed by more pattern (log lines can be megabytes).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from console.catalogue import refiners as rf
from console.catalogue import wordings
from console.catalogue.milestones import SHARDS_MARKER, WEIGHTS_END, WEIGHTS_START
from console.catalogue.specs import R_FALLBACK, R_ROOT, R_SYMPTOM, Hit

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
    # a retry, not yet a failure -- a later line holding one of these (the same source) clears it
    retried: tuple[str, ...] = field(default=())


def _c(p: str, flags: int = 0) -> re.Pattern[str]:
    return re.compile(p, flags)



# ------------------------------------------------------------------ signatures

# what says a retry succeeded: the weights load (the files came), Ray runs (the head answered)
_LOADING = (SHARDS_MARKER, *WEIGHTS_START.words, *WEIGHTS_END.words,
            "Application startup complete.", "The server is fired up and ready to roll!")
_RAY_UP = ("Ray runtime started", "Connected to Ray cluster", "Started a local Ray instance")

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
              refine=rf.ib_completion),
    Signature("nccl-ib-error", ("ibv_modify_qp failed",),
              _c(r"ibv_modify_qp failed with (?:error )?(?P<why>(?:\d+\s*)?[^,.]*+)"), refine=rf.modify_qp),
    Signature("nccl-ib-error", ("Got async event", "Got async error event", "async fatal event"),
              _c(r"(?:Got async (?:error )?|async fatal )event ?: ?(?P<event>[^\[]*+)"), refine=rf.ib_async),
    # --- version differences between the ranks
    Signature("nccl-version-mismatch", ("is neither AF_INET",), _c(r"with family \d+ is neither AF_INET"),
              refine=rf.family),
    Signature("nccl-version-mismatch", ("essage truncated",),
              _c(r"[Mm]essage truncated ?: ?(?:received|receiving) \d+ bytes instead of \d+"), refine=rf.family),
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
              refine=rf.store),
    Signature("dist-store-timeout", ("The client socket has",), _c(r"The client socket has failed to connect to"),
              severity="warning", rank=R_ROOT + 5, refine=rf.store,
              cause="the torch.distributed rendezvous (TCPStore) cannot reach the head yet"),
    Signature("dist-store-timeout", ("waiting for clients", "waiting for workers"),
              _c(r"Timed out after \d+ seconds waiting for (?:clients|workers)"), refine=rf.store),
    Signature("dist-store-timeout", ("via c10d key-value store",),
              _c(r"retr\w+ ncclUniqueId from \[\d+\] via c10d key-value store"),
              cause="this rank never got the NCCL id from rank 0 through the torch.distributed store: rank 0 did not "
                    "reach that point (it failed or is slow) or the store connection broke"),
    Signature("dist-store-timeout", ("DistStoreError",), _c(r"DistStoreError: wait timeout|DistStoreError: Socket Timeout")),
    # --- collectives that never finish
    Signature("nccl-timeout", ("Watchdog caught",), _c(r"Watchdog caught collective operation timeout"), refine=rf.watchdog),
    Signature("nccl-timeout", ("by watchdog at work", "Timeout at NCCL work"),
              _c(r"detected by watchdog at work: \d|Timeout at NCCL work: \d"), refine=rf.watchdog),
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
              refine=rf.illegal),
    Signature("gpu-xid", ("NVRM: Xid",), _c(r"NVRM: Xid \([^)]*+\): (?P<code>\d+)"), refine=rf.xid),
    Signature("gpu-xid", ("NVRM",), _c(r"fallen off the bus"), refine=rf.xid),  # the driver's lines carry NVRM:
    Signature("gpu-xid", ("uncorrectable ECC error",), _c(r"uncorrectable ECC error encountered"),
              cause="the GPU's memory reported an uncorrectable ECC error (Xid 48/94/95 in the host's kernel log)"),
    # --- the GPU itself: architecture, runtime, driver
    Signature("gpu-arch-unsupported", ("no kernel image is available",), refine=rf.no_kernel_image),
    Signature("gpu-arch-unsupported", ("is not defined for option 'gpu-name'",),
              _c(r"Value 'sm_\w+' is not defined for option 'gpu-name'"), refine=rf.no_kernel_image),
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
              _c(r"Error while (?:creating|attaching to) shared memory segment"), refine=rf.shm),
    # --- gloo / torch interface
    Signature("gloo-interface", ("(local) address",), _c(r"Unable to resolve hostname to a \(local\) address")),
    Signature("gloo-interface", ("connectFullMesh failed",), _c(r"connectFullMesh failed"), severity="error"),
    Signature("gloo-interface", ("Unable to find address for",), severity="error"),
    # --- memory
    Signature("cuda-oom", ("out of memory", "not enough GPU memory", "Failed to allocate memory for"),
              _c(r"CUDA out of memory|OutOfMemoryError|CUDA error: out of memory|cudaErrorMemoryAllocation|"
                 r"not enough GPU memory|Failed to allocate memory for \w+ with size \d+"), refine=rf.oom),
    Signature("kv-cache-too-small", ("available KV cache memory",), _c(r"larger than the available KV cache memory"),
              refine=rf.kv_estimate),
    Signature("kv-cache-too-small", ("stored in KV cache",),
              _c(r"larger than the maximum number of tokens that can be stored in KV cache"), refine=rf.kv_estimate),
    Signature("kv-cache-too-small", ("No available memory for the cache blocks",)),
    Signature("kv-cache-too-small", ("Not enough memory",), _c(r"Not enough memory\. Please try to increase --mem-fraction-static"),
              fix="raise --mem-fraction-static or lower --context-length / --max-running-requests"),
    Signature("kv-cache-too-small", ("alloc_req_slots runs out of memory",),
              cause="SGLang's request-to-token pool has fewer slots than the running requests",
              fix="lower --max-running-requests (or raise --mem-fraction-static)"),
    Signature("kv-cache-too-small", ("is larger than the profiled value",),
              _c(r"is larger than the profiled value (?P<value>-?\d+)"), refine=rf.profiled_tokens),
    Signature("free-memory-at-startup", ("on startup is less than desired", "< desired utilization"),
              _c(r"on startup is less than desired|Free memory on \S+ \([\d./ ]+GiB\) < desired utilization")),
    Signature("state-cache-too-small", ("state cache is too small", "Mamba cache blocks"),
              _c(r"state cache is too small|max_num_reqs=0\b|exceeds available Mamba cache blocks"), refine=rf.mamba),
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
                 r"than the derived"), refine=rf.max_len),
    # --- parsers
    Signature("tool-parser-mismatch", ("tool_call_parser", "tool-call-parser"),
              _c(r"tool[_-]call[_-]parser['\"]?\s*[:=]?\s*['\"]?glm45\b"), refine=rf.tool_parser),
    Signature("parser-error", ("Error in extracting tool call", "Error trying to handle streaming tool call",
                               "Error in chat_completion_full_generator", "Reasoning parsing error",
                               "Detector.__init__() got an unexpected keyword", "Failed to parse reasoning",
                               "Error in detect_and_parse"),
              refine=rf.reasoning),
    Signature("parser-error", ("tool_parser.py:", "reasoning_parser.py:", "_detector.py:"),
              _c(r"ERROR [^\[]*+\[\w*?(?:tool_parser|reasoning_parser|_detector)\.py:\d++\]"), refine=rf.reasoning),
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
                 r"|Repo model \S+ is gated|Repository Not Found for url"), refine=rf.not_dataset),
    Signature("gated-dataset", ("GatedRepoError", "is a gated", "gated dataset"),  # cais/hle lines say "gated" or "Error"
              _c(r"GatedRepoError|cais/hle|is a gated|gated (?:dataset|repo)"), refine=rf.dataset_or_model),
    Signature("gated-dataset", ("Client Error", "requires approval"),
              _c(r"Client Error: (?:Unauthorized|Forbidden) for url|requires approval|"
                 r"You must be authenticated to access it"),
              refine=lambda m, t: ("huggingface.co" in t or "hf.co" in t or "gated" in t.lower() or "approval" in t)
              and (rf.dataset_or_model(m, t) or "approval" in t)),
    Signature("model-access-denied", ("Client Error", "is restricted"),
              _c(r"Client Error: (?:Unauthorized|Forbidden) for url: https://huggingface\.co/(?!datasets/)"
                 r"|You must be authenticated to access it"), refine=rf.not_dataset),
    # --- processes
    Signature("worker-died", ("died unexpectedly", "died, exit code", "A worker died or was killed"),
              _c(r"(?:Worker|WorkerProc|worker|proc|Process|actor)\b.*?died|died unexpectedly|"
                 r"A worker died or was killed"), refine=rf.worker_exit),
    Signature("worker-died", ("unexpectedly failed", "the child failed"),
              _c(r"Child process unexpectedly failed|scheduler is dead|Received sigquit from a child process"),
              refine=rf.worker_exit),
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
    # --- the hub, Ray's own words, the kernel log (journalctl -k / dmesg lines)
    Signature("hub-unreachable", ("thrown while requesting",),
              _c(r"thrown while requesting (?:HEAD|GET) https?://(?:huggingface\.co|hf\.co|hf-mirror\.com)"),
              severity="warning", rank=R_ROOT + 5, retried=_LOADING,
              cause="the hub does not answer: the model's files are being fetched with connection retries"),
    Signature("hub-unreachable", ("We couldn't connect to", "OfflineModeIsEnabled", "LocalEntryNotFoundError",
                                  "offline mode is enabled", "Max retries exceeded"),
              _c(r"We couldn't connect to '?https?://(?:huggingface\.co|hf\.co)|OfflineModeIsEnabled|"
                 r"LocalEntryNotFoundError|offline mode is enabled|"
                 r"host='(?:huggingface\.co|hf\.co|cdn-lfs[\w.\-]*+)', port=\d++\): Max retries exceeded")),
    Signature("ray-head-unreachable", ("Unable to connect to GCS", "Failed to connect to GCS at address"),
              _c(r"Unable to connect to GCS at|Failed to connect to GCS at address \S*+ within"),
              severity="warning", rank=R_ROOT + 5, retried=_RAY_UP,
              cause="this node cannot reach the Ray head's GCS yet (retrying): the head is not up, the address is "
                    "wrong, or a firewall blocks the port"),
    Signature("ray-head-unreachable", ("connect to GCS", "cluster ID from GCS", "waiting for GCS", "reconnect to GCS",
                                       "Failed to start GCS", "ray client connection timeout"),
              _c(r"Failed to connect to GCS within \d++ seconds|Failed to get cluster ID from GCS|"
                 r"Timed out while waiting for GCS to become available|Couldn't reconnect to GCS server|"
                 r"Failed to connect to GCS\. Please check|Failed to start GCS|ray client connection timeout")),
    Signature("cuda-init-error", ("Unexpected error from cudaGetDeviceCount", "CUDA driver initialization failed",
                                  "cudaErrorInitializationError", "CUDA error: initialization error", "CUDA_ERROR_"),
              _c(r"Unexpected error from cudaGetDeviceCount\(\)|CUDA driver initialization failed|"
                 r"cudaErrorInitializationError|CUDA error: initialization error|"
                 r"CUDA_ERROR_(?:SYSTEM_NOT_READY|SYSTEM_DRIVER_MISMATCH|NOT_INITIALIZED)"), refine=rf.cuda_init),
    Signature("duplicate-gpu", ("Duplicate GPU detected",),
              _c(r"Duplicate GPU detected : rank \d++ and rank \d++ both on CUDA device")),
    Signature("tp-not-divisible", ("must be divisible by tensor parallel size",
                                   "must be divisible by the tensor model parallel size"),
              _c(r"must be divisible by (?:tensor parallel size|the tensor model parallel size)"), refine=rf.tp_heads),
    Signature("tp-not-divisible", ("must be divisible by pipeline parallel size",),
              cause="the pipeline-parallel size does not divide the model's layers",
              fix="use a --pipeline-parallel-size that divides the layer count the log states"),
    Signature("tp-not-divisible", ("not divisible by the number of tensor parallel", "too large tensor parallel size"),
              _c(r"number of GPUs per node is not divisible by the number of tensor parallel|"
                 r"caused by too large tensor parallel size"),
              cause="the tensor-parallel size does not fit the GPUs per node or the quantized weights' shape"),
    Signature("model-type-unsupported", ("but Transformers does not recognize this architecture",
                                         "are not supported for now"),
              _c(r"has model type `?[\w.\-]++`? but Transformers does not recognize this architecture|"
                 r"Model architectures \[[^\]]*+\] are not supported for now"), refine=rf.model_type),
    Signature("host-oom-kill", ("Out of memory: Killed process", "oom-kill:", "out of memory: Killed process"),
              _c(r"[Oo]ut of memory: Killed process \d++|oom-kill:constraint="), refine=rf.oom_kill),
    Signature("host-oom-kill", ("running low on memory", "killed due to memory pressure", "RayOutOfMemoryError"),
              _c(r"Task was killed due to the node running low on memory|Workers? \(tasks / actors\) killed due to "
                 r"memory pressure|RayOutOfMemoryError"),
              cause="Ray's memory monitor killed a worker: the node ran low on host memory (Ray kills before the "
                    "kernel's OOM killer would)"),
    Signature("rdma-memreg-failed", ("ibv_reg_mr", "ibv_reg_dmabuf_mr", "Failed to register mr", "reg mr failed",
                                     "CREATE_MKEY"),
              _c(r"Call to ibv_reg_(?:dmabuf_)?mr\w*+ failed|ibv_reg_mr failed|Failed to register mr|reg mr failed|"
                 r"CREATE_MKEY\(0x\w++\) op_mod\(0x\w++\) failed"), refine=rf.memreg),
    # the kernel's words for the RDMA link and the HCA (console.probes.kernel_log finds these lines)
    Signature("nccl-ib-error", ("Link down",), _c(r"mlx5_core \S++(?: [^\s:]++)?: Link down"), rank=R_ROOT + 4,
              cause="the RDMA port's link went down (kernel log: mlx5 Link down): a flapping cable or port",
              fix="check the cable and the port counters on both ends (`ibstat`, link_downed in "
                  "/sys/class/infiniband/*/ports/*/counters); relaunch once the link stays up"),
    Signature("nccl-ib-error", ("health compromised", "firmware fatal", "device's health"),
              _c(r"mlx5_core \S++.*?(?:health compromised|firmware fatal|device's health)"),
              cause="the HCA reported a firmware/health fault in the kernel log",
              fix="reset the HCA (reboot the station), update its firmware; replace it if it recurs"),
    # NCCL's proxy thread and its sockets: the connection to a peer broke (the peer died or the path failed)
    Signature("nccl-connect", ("Failed to execute operation Connect", "Socket recv failed while polling",
                               "Call to recv from"),
              _c(r"\[Proxy Service \d++\] Failed to execute operation Connect from rank \d++|"
                 r"Socket recv failed while polling for opId|Call to recv from \S++ failed"),
              rank=R_SYMPTOM - 1,
              cause="NCCL's proxy lost its connection to a peer (the peer process died or the network path broke): "
                    "the first error on the other station, or a link fault, is the cause",
              fix="read the other station's log for its first error; run the link checks if both stayed up"),
    # Ray's words for shared memory and placement
    Signature("shm-too-small", ("instead of /dev/shm because /dev/shm has only",),
              _c(r"object store is using \S++ instead of /dev/shm because /dev/shm has only \d++ bytes"),
              severity="warning", refine=rf.shm_object_store,
              fix="--ipc=host (or --shm-size 16g) on every station's container"),
    Signature("shm-too-small", ("exceeds /dev/shm size",),
              _c(r"configured object store size \([\d.]++ ?GB\) exceeds /dev/shm size"),
              cause="Ray's object store does not fit in the container's /dev/shm",
              fix="--ipc=host (or --shm-size 16g) on every station's container"),
    Signature("ray-resources", ("cannot be scheduled right now",),
              _c(r"resource request cannot be scheduled right now: \{[^}]*?'GPU'"),
              cause="Ray cannot schedule a request for a GPU: every GPU of the cluster is taken or no node has one"),
    Signature("ray-resources", ("Cannot provide a placement group",), severity="error",
              cause="Ray never found the GPUs for vLLM's placement group and vLLM gave up",
              fix="`ray status` must list every station's GPU before `vllm serve`; VLLM_HOST_IP equal to `ray start "
                  "--node-ip-address` on each station; --tensor-parallel-size x --pipeline-parallel-size = GPUs"),
    Signature("ray-resources", ("exceeds available GPUs",), _c(r"parallel size \(\d++\) exceeds available GPUs"),
              cause="the parallelism asks for more GPUs than the Ray cluster has (a station has not joined)"),
)

# each stack's wordings of the kinds above (console.catalogue.wordings: one row per wording)
_WORDING_REFINERS: dict[str, Refiner] = {"worker-died": rf.worker_exit, "cuda-oom": rf.oom}
SIGNATURES += tuple(
    Signature(w.kind, (w.anchor,), pat, severity=w.severity, cause=w.cause, retried=w.retried,
              refine=_WORDING_REFINERS.get(w.kind))
    for w, pat in wordings.compiled())

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
    *((w, "load_start", _c(re.escape(w))) for w in WEIGHTS_START.words),
    (SHARDS_MARKER, "load_start", _c(re.escape(SHARDS_MARKER) + r":\s+\d")),
    *((w, "load_end", _c(re.escape(w))) for w in WEIGHTS_END.words),
    ("cuda capability supported", "cap_range", _c(r"\(\d+\.\d+\) - \((?P<hi>\d+)\.(?P<him>\d+)\)")),
    ("supports CUDA capabilities", "cap_list", _c(r"supports CUDA capabilities (?P<v>(?:sm_\d+a? ?)++)")),
    ("GPU Direct RDMA", "gdr_on", _c(r"GPU Direct RDMA (?:\(DMABUF\) )?[Ee]nabled")),
    # --- the run's context (console.diagnosis.context.note): hosts and ranks, the stack, other engines' loading
    # nccl-tests lists every rank with its host before the first collective
    (" Pid ", "rank_host", _c(r"#\s*+Rank\s++\d++\s++(?:Group\s++\d++\s++)?Pid\s++\d++\s++on\s++(?P<host>\S++)\s++"
                              r"device")),
    # NCCL's communicator summary: ranks in all, nodes, ranks on this host
    # (anchored on "nNodes", which the same line carries: no line is scanned twice for it)
    ("nNodes", "local_ranks", _c(r"nRanks (?P<n>\d++) nNodes (?P<nodes>\d++) localRanks (?P<v>\d++)")),
    # which stack speaks: lines each prints once at start (anchors with no frequent scan key: see scan.KEY_WORDS)
    ("[TensorRT-LLM][INFO] MPI size", "stack:tensorrt-llm", _c(r"MPI size")),
    ("[TensorRT-LLM][INFO] Engine version", "stack:tensorrt-llm", _c(r"Engine version")),
    ("[TensorRT-LLM] TensorRT-LLM version", "stack:tensorrt-llm", _c(r"TensorRT-LLM version")),
    ("ggml_cuda_init:", "stack:llama.cpp", _c(r"ggml_cuda_init: (?:found|GGML_CUDA)")),
    ("Initializing a V1 LLM engine", "stack:vllm", _c(r"Initializing a V1 LLM engine")),
    ("Initializing an LLM engine", "stack:vllm", _c(r"Initializing an LLM engine")),
    ("[multiproc_worker_utils.py:", "stack:vllm", _c(r"\[multiproc_worker_utils\.py:\d")),
    ("sglang.launch_server", "stack:sglang", _c(r"sglang\.launch_server")),
    ("torch distributed begin", "stack:sglang", _c(r"Init torch distributed begin")),
    ("torch distributed ends", "stack:sglang", _c(r"Init torch distributed ends")),
    ("# nThread ", "stack:nccl-tests", _c(r"# nThread \d++ nGpus \d++")),
    # the weights loading (other engines' words; vLLM's and SGLang's are probes of their own)
    ("model tensors, this can take a while", "load_start", _c(r"load_tensors: loading model tensors")),
    ("llama_new_context_with_model:", "load_end", _c(r"llama_new_context_with_model:")),
    ("llama_context:", "load_end", _c(r"llama_context: ")),
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

# Lines that end the run whatever level they are logged at (often WARNING or none): a launcher killed by a
# signal, a node declared dead, a test tool's failure line. No entry explains them: unrecognised, never silent.
RUN_ENDING_ANCHORS = ("death signal", ") received by PID", "marked dead", "marked as dead", "Test NCCL failure",
                      "Test CUDA failure", "docker: Error response from daemon:")
# `docker run`'s own refusal ("docker: Error response from daemon: ...") means the container never started;
# without the "docker: " prefix the same words come from `docker logs` of a container that is gone (not a run's end)
RUN_ENDING = _c(r"Received \d++ death signal|Signal \d++ \(SIG\w++\) received by PID \d++|"
                r"marked (?:as )?dead\b|Test (?:NCCL|CUDA) failure \S++ '[^']*+'|docker: Error response from daemon:")
DAEMON_ERROR = "Error response from daemon:"


def innermost_cause(msg: str) -> str:
    """The specific end of Docker's wrapped error chain ('OCI runtime create failed: ... caused: ...
    stderr: nvidia-container-cli: mount error: ...'): the hook's stderr when it said something, else
    what follows the daemon's prefix; '' for any other line."""
    if DAEMON_ERROR not in msg:
        return ""
    tail = msg.split(DAEMON_ERROR, 1)[1]
    if "stderr: " in tail and (inner := tail.rsplit("stderr: ", 1)[1].strip()):
        return inner
    return tail.strip()
GENERIC_ANCHORS = ("Error", "ERROR", "CRITICAL", "Traceback (most recent call last)", "NCCL WARN",
                   "Exception", "exited with code", "exit code", "exitcode", "Segmentation fault",
                   "Fatal Python error", "terminate called after throwing", "what():", "] [E] ",
                   # lines that end a run without an error level (their meaning, not their level, says so)
                   *RUN_ENDING_ANCHORS)
EXCEPTION_TYPE = (r"(?<![\w.])(?P<type>(?:[A-Za-z_]\w*+\.)*+(?:[A-Z]\w*?(?:Error|Exception)|Exception|KeyboardInterrupt"
         r"|SystemExit))")
EXCEPTION_GATE = ("Error", "Exception", "KeyboardInterrupt", "SystemExit")  # one of them is in every match
EXCEPTION_LINE = _c(EXCEPTION_TYPE + r"(?:\s*+:\s*+(?P<msg>\S.*)|\s*+$)")
# a level token where log formats put it: vLLM "ERROR 04-08 19:59:10 ...", uvicorn "ERROR:    ...",
# logging "- ERROR - ...", "[ERROR] ...", aligned columns "ERROR    ...", TensorRT's "[TRT] [E] ..."
LEVEL_LINE = _c(r"(?:(?<![\w='\"\-])(?P<level>ERROR|CRITICAL|FATAL)(?:\s++\d\d-\d\d |:\s++|\s++-\s++|\]\s*+|\s{2,}+)"
                r"|\] \[E\] )"
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
