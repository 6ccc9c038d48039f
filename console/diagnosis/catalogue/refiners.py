"""Refiners: a signature match's sub-cause, severity or rank read from the evidence line itself
(which collective timed out, which completion status, which exit code, which Xid).

``refine(match, text)`` returns a ``Hit`` (override), None (keep the defaults) or False (not a finding
after all). Every regex here is linear in the line length.
"""

from __future__ import annotations

import re

from console.catalogue.specs import (
    OOM_LOAD_FIX,
    R_DEAD,
    R_HANG_HINT,
    R_ROOT,
    R_SETUP,
    R_SYMPTOM,
    Hit,
)


def watchdog(m: re.Match[str] | None, text: str) -> Hit | None:
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


def ib_completion(m: re.Match[str] | None, text: str) -> Hit | None:
    if not m:
        return None
    code = int(m.group("code"))
    cause, fix, rank = _WC_STATUS.get(code, (f"IB completion error status {code}", None, None))
    return Hit(cause=f"RoCE completion error {code} ({cause})", fix=fix, rank=rank)


def ib_async(m: re.Match[str] | None, text: str) -> Hit | None:
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


def modify_qp(m: re.Match[str] | None, text: str) -> Hit:
    why = m.group("why").strip() if m else ""
    return Hit(cause=f"the queue pair could not be connected (ibv_modify_qp: {why}): wrong RoCE GID index, "
                     "or the peer is unreachable over RoCE")


def worker_exit(m: re.Match[str] | None, text: str) -> Hit | None:
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


def kv_estimate(m: re.Match[str] | None, text: str) -> Hit | None:
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


def profiled_tokens(m: re.Match[str] | None, text: str) -> Hit | bool:
    value = int(m.group("value")) if m else 0
    if value > 0:
        return False  # a smaller profiled pool than asked is SGLang's normal sizing, not a failure
    return Hit(cause=f"after the weights SGLang profiled {value:,} tokens of KV cache: nothing is left for it",
               fix="raise --mem-fraction-static, use more tensor parallelism, or a smaller quantization")


def mamba(m: re.Match[str] | None, text: str) -> Hit | None:
    n = re.search(r"max_num_seqs \((\d+)\) exceeds available Mamba cache blocks \((\d+)\)", text)
    if n:
        return Hit(cause=f"--max-num-seqs ({int(n.group(1)):,}) is above the {int(n.group(2)):,} sequences the Mamba "
                         "state cache can hold", fix=f"--max-num-seqs {n.group(2)} (or less); the context need not shrink")
    return None


def tool_parser(m: re.Match[str] | None, text: str) -> bool:
    return bool(re.search(r"glm-?5", text, re.I))


def dataset_or_model(m: re.Match[str] | None, text: str) -> bool:
    """A hub refusal names a data set (gated-dataset) or a model (model-access-denied)."""
    return "/datasets/" in text or "cais/hle" in text or "dataset" in text.lower()


def not_dataset(m: re.Match[str] | None, text: str) -> bool:
    return not dataset_or_model(m, text)


def max_len(m: re.Match[str] | None, text: str) -> Hit | bool:
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


def xid(m: re.Match[str] | None, text: str) -> Hit:
    if m is None or not m.groupdict().get("code"):
        return Hit(rank=R_ROOT - 3, cause="the GPU has fallen off the bus and no longer answers the driver: "
                                          "power, thermal or PCIe failure",
                   fix="reboot the station; check power, cooling and the GPU's seating; replace it if it recurs")
    from console.catalogue import xid as xids  # NVIDIA's catalogue, one table (the health view's too)

    code = int(m.group("code"))
    info = xids.meaning(code)
    meaning, fix = (f"{info.text} ({info.cause})", info.action) if info else (
        f"not in the console's table: see NVIDIA's Xid catalogue, {xids.CATALOGUE_URL}", None)
    if code in (144, 145, 146, 147, 148, 149, 150):
        meaning, fix = "NVLink / NVLink network error", "check the NVLink fabric; reset the GPU"
    return Hit(cause=f"the NVIDIA driver reported Xid {code} on this station: {meaning}", fix=fix,
               rank=R_ROOT - 3 if code in (48, 64, 79, 95) else None)


def no_kernel_image(m: re.Match[str] | None, text: str) -> Hit | None:
    sm = re.search(r"sm_(\d+)a?", text)
    if sm and m is not None and "gpu-name" in text:
        return Hit(cause=f"the bundled ptxas does not know sm_{sm.group(1)}: Triton (or torch.compile) cannot "
                         "compile kernels for this GPU")
    return None



def illegal(m: re.Match[str] | None, text: str) -> Hit | None:
    if "watchdog" in text.lower():
        return Hit(cause="a GPU kernel faulted (illegal memory access); the NCCL watchdog reported it and took the "
                         "process down: this is not a network timeout")
    return None


def store(m: re.Match[str] | None, text: str) -> Hit | None:
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


def shm(m: re.Match[str] | None, text: str) -> Hit | None:
    if "attaching to shared memory" in text:
        return Hit(cause="NCCL believes two ranks share a host but one cannot see the other's /dev/shm segment: "
                         "separate containers without --ipc=host, or two stations with the same hostname",
                   fix="--ipc=host on every container; give each station its own hostname (or NCCL_HOSTID)")
    return None


def oom(m: re.Match[str] | None, text: str) -> Hit | bool | None:
    if "running low on memory" in text or "RayOutOfMemoryError" in text:
        return False  # Ray's memory monitor: the host's memory, not the GPU's (host-oom-kill)
    if "not enough GPU memory" in text and "load model" in text.lower():
        return Hit(cause="the model's weights do not fit in this GPU's memory", fix=OOM_LOAD_FIX)
    if "AlignedAllocator" in text:
        return Hit(cause="FlashInfer's workspace buffer is too small for this batch",
                   fix="lower --chunked-prefill-size / --max-running-requests, or raise "
                       "SGLANG_FLASHINFER_WORKSPACE_SIZE")
    return None


def family(m: re.Match[str] | None, text: str) -> Hit:
    return Hit(severity="warning", rank=R_SETUP + 2,
               cause="NCCL read a malformed peer address or message size during bootstrap: the ranks most likely run "
                     "different NCCL versions (or different NCCL_* settings)",
               fix="compare the NCCL version and the NCCL_* environment on both stations; run the same image on all")


def reasoning(m: re.Match[str] | None, text: str) -> Hit | None:
    if "Reasoning" in text or "reasoning" in text:
        return Hit(cause="the reasoning parser crashed on a request: that reply loses its reasoning/content split")
    return None




# CUDA initialisation codes, the hub, Ray's head, the kernel's OOM killer

_CUDA_INIT = {  # cudaError_t -> (meaning, fix); the CUDA runtime API's error codes
    3: ("cudaErrorInitializationError: the driver could not be initialised", None),
    35: ("cudaErrorInsufficientDriver: the driver is older than the CUDA runtime", None),
    100: ("cudaErrorNoDevice: no GPU is visible to the process", "start the container with --gpus all"),
    101: ("cudaErrorInvalidDevice: CUDA_VISIBLE_DEVICES names a GPU that does not exist", None),
    802: ("cudaErrorSystemNotReady: the GPU system is not initialised -- on NVSwitch systems nvidia-fabricmanager "
          "is not running or differs from the driver's version",
          "start nvidia-fabricmanager (`systemctl status nvidia-fabricmanager`) with the driver's exact version; "
          "reboot if it will not start"),
    803: ("cudaErrorSystemDriverMismatch: the user-mode driver library differs from the kernel module "
          "(a driver update without a reboot, or a CUDA compat library in the image that does not fit)",
          "reboot the station after a driver update; do not mount a host libcuda of another version into the image"),
    999: ("cudaErrorUnknown: the driver is in a bad state", "reboot the station (or reload nvidia_uvm)"),
}


def cuda_init(m: re.Match[str] | None, text: str) -> Hit | bool | None:
    code = re.search(r"Error (\d{1,4})\b|error (?:code )?(\d{1,4}):|CUDA_ERROR_\w+ \((\d+)\)", text)
    if not code:
        return None
    n = int(next(g for g in code.groups() if g))
    if n == 804:  # forward compatibility on unsupported hardware: the driver is too old (its own id)
        return False
    meaning, fix = _CUDA_INIT.get(n, (f"CUDA error {n}", None))
    return Hit(cause=f"CUDA could not initialise the GPU (error {n}, {meaning})", fix=fix)


def tp_heads(m: re.Match[str] | None, text: str) -> Hit | None:
    nums = re.search(r"\((\d+)\) must be divisible by (?:tensor parallel size|the tensor model parallel size) \((\d+)\)",
                     text)
    if not nums:
        return None
    heads, tp = int(nums.group(1)), int(nums.group(2))
    ok = [d for d in range(1, heads + 1) if heads % d == 0 and d <= max(tp * 2, 8)]
    return Hit(cause=f"the model has {heads} attention heads, which --tensor-parallel-size {tp} does not divide",
               fix=f"use a tensor-parallel size that divides {heads} ({', '.join(map(str, ok))}); combine with "
                   "--pipeline-parallel-size to use the remaining GPUs")


def model_type(m: re.Match[str] | None, text: str) -> Hit | None:
    kind = re.search(r"model type `?([\w.\-]+)`? but|architectures? \[?'?([\w]+)'?\]? (?:are|is) not supported", text)
    if not kind:
        return None
    name = kind.group(1) or kind.group(2)
    return Hit(cause=f"the engine's libraries do not know the model type '{name}': Transformers or the engine in this "
                     "image is older than the model")


def oom_kill(m: re.Match[str] | None, text: str) -> Hit | None:
    who = re.search(r"Killed process (\d+) \(([^)]*)\)", text)
    if not who:
        task = re.search(r"task=([^,]+),pid=(\d+)", text)
        if not task:
            return None
        return Hit(cause=f"the host's OOM killer killed process {task.group(2)} ({task.group(1)}): the station ran "
                         "out of host memory")
    rss = re.search(r"anon-rss:([\d,]+)kB", text)
    gib = f", {int(rss.group(1).replace(',', '')) / 2**20:.1f} GiB resident" if rss else ""
    return Hit(cause=f"the host's OOM killer killed process {who.group(1)} ({who.group(2)}{gib}): the station ran "
                     "out of host memory")


def memreg(m: re.Match[str] | None, text: str) -> Hit | None:
    if "Bad address" in text or "errno 14" in text.lower():
        return Hit(cause="RDMA could not register GPU memory (Bad address): GPUDirect RDMA is not available "
                         "(nvidia-peermem not loaded, or no dmabuf support)",
                   fix="load nvidia-peermem on the host (`modprobe nvidia-peermem`) or use a dmabuf-capable driver and "
                       "kernel; NCCL_NET_GDR_LEVEL=LOC to confirm")
    if re.search(r"Cannot allocate memory|\[-12\]|err\(-12\)|limits exceeded", text):
        return Hit(cause="RDMA memory registration failed with ENOMEM: the locked-memory limit (memlock) in the "
                         "container is too low, or the HCA's registration limits were exceeded")
    return None


def shm_object_store(m: re.Match[str] | None, text: str) -> Hit | bool:
    size = re.search(r"/dev/shm has only (\d+) bytes", text)
    if size and int(size.group(1)) >= 4 << 30:
        return False  # a large /dev/shm Ray still found too small: a performance note, not this fault
    mib = f"{int(size.group(1)) / 2**20:.0f} MiB" if size else "too small"
    return Hit(cause=f"/dev/shm is {mib} in the container: Ray's object store moved to /tmp (slow), and NCCL's and "
                     "vLLM's shared memory will run out the same way (Docker's default is 64 MiB)")
