"""Each stack's words for a kind the catalogue already defines by meaning: one row per wording.

A kind (``cuda-oom``, ``gpu-unavailable``, ``port-in-use`` ...) is defined once, by what it means, in
``specs``; the engines, allocators, kernel libraries, launchers and runtimes each say it their own way.
A new wording is one row here: the kind, the stack that says it, a literal anchor (the cheap substring
the batch scan looks for) and, where the anchor alone is not specific enough, a confirming regex. Rows
may refine the cause for that wording, mark it as a retry that a later success line clears, or give the
severity its meaning sets (a WARNING line that ends the run is still an error).

Anchors avoid the scan's frequent keys where they can (``console.catalogue.scan.KEY_WORDS``: "memory", "load",
"version" ... are in many healthy lines, and every anchor sharing a key is checked on each line it hits).
Regexes here follow the catalogue's rule: linear in the line length (no nested quantifiers; a lazy run
only after a literal prefix).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

Stack = Literal["vllm", "sglang", "tensorrt-llm", "tensorrt", "llama.cpp", "ray", "torch", "nccl", "nccl-tests",
                "kernel", "container", "any"]


@dataclass(frozen=True)
class Wording:
    """One stack's wording of a kind."""

    kind: str
    stack: Stack
    anchor: str
    pattern: str | None = None
    cause: str | None = None
    severity: str | None = None  # what the meaning says, whatever level the line was logged at
    retried: tuple[str, ...] = field(default=())  # a later line holding one of these: the retry succeeded


# what says llama.cpp got past a failed allocation it retried (the server goes on to serve)
_LLAMA_UP = ("load_model: initializing", "main: model loaded", "server is listening on", "all slots are idle")

WORDINGS: tuple[Wording, ...] = (
    # --- GPU memory exhausted
    Wording("cuda-oom", "llama.cpp", "cudaMalloc failed: out of memory", retried=_LLAMA_UP),
    Wording("cuda-oom", "llama.cpp", ": out of memory", r"CUDA error \d++ at \S++: out of memory"),
    Wording("cuda-oom", "tensorrt", "Error Code 2: OutOfMemory", r"Error Code 2: OutOfMemory \("),
    Wording("cuda-oom", "tensorrt-llm", "due to insufficient GPU",
            r"Executor creation failed due to insufficient GPU memory"),
    Wording("cuda-oom", "tensorrt-llm", "CUDA runtime error in ", r"CUDA runtime error in [^\n]*?\): out of memory"),
    # --- the container cannot reach the GPU (the runtime hook fails before the engine starts)
    Wording("gpu-unavailable", "container", "nvidia-container-cli: initialization error",
            r"nvidia-container-cli: initialization error: (?:nvml error: driver not loaded|driver error|"
            r"cuda error: unknown error|load library failed)",
            cause="the NVIDIA container runtime cannot talk to the host's driver (not loaded, or broken after an "
                  "update): no container gets a GPU until `nvidia-smi` works on the host"),
    Wording("gpu-unavailable", "container", "cuda-capable device is detected",
            cause="no GPU is visible: none passed into the container (--gpus / --device) or the driver sees none"),
    Wording("gpu-unavailable", "any", "CUDA_ERROR_NO_DEVICE"),
    # --- a port the server needs is taken
    Wording("port-in-use", "llama.cpp", "couldn't bind HTTP server", r"couldn't bind HTTP server socket"),
    Wording("port-in-use", "llama.cpp", "couldn't bind to server", r"couldn't bind to server socket"),
    # --- shared memory ran out (PyTorch's DataLoader says "Bus error" and names shm)
    Wording("shm-too-small", "torch", "caused by insufficient shared", r"insufficient shared memory \(shm\)"),
    Wording("shm-too-small", "torch", "killed by signal: Bus error", r"DataLoader worker \(pid \d++\) is killed by "
                                                                     r"signal: Bus error"),
    # --- a rank or worker was killed (torchrun's wording of the exit)
    Wording("worker-died", "torch", "failed (exitcode:", r"failed \(exitcode: -?\d++\) local_rank"),
    # --- the GPU cannot be initialised
    Wording("cuda-init-error", "llama.cpp", "failed to initialize CUDA", r"ggml_cuda_init: failed to initialize CUDA"),
)

# An error line that says it is retried is no cause once the run goes on: these lines (any stack) say it did.
RETRY_LINE = re.compile(r"\b(?:[Rr]etrying\b|will retry\b|[Rr]etry \d|trying again\b|retries left\b)")
RUN_WENT_ON = ("Application startup complete.", "The server is fired up and ready to roll!", "Uvicorn running on",
               "server is listening on", "all slots are idle", "successfully loaded", "Init COMPLETE",
               "Capture cuda graph end", "Graph capturing finished")

# the fix that names the stack's own knobs, where the kind's generic fix names vLLM's
STACK_FIXES: dict[tuple[str, str], str] = {
    ("cuda-oom", "sglang"): "lower --mem-fraction-static (more room for activations and CUDA graphs), "
                            "--max-running-requests or --chunked-prefill-size; while loading weights that do not "
                            "fit: more tensor parallelism or a smaller quantization",
    ("cuda-oom", "llama.cpp"): "offload fewer layers (-ngl), a smaller context (-c) or batch (-b / -ub), split "
                               "across GPUs (--tensor-split), or a smaller quantization",
    ("cuda-oom", "tensorrt-llm"): "lower kv_cache_free_gpu_memory_fraction, max_batch_size or max_num_tokens; for an "
                                  "engine build: a smaller max_batch_size / max_input_len, or build on a larger GPU",
}


def compiled() -> tuple[tuple[Wording, re.Pattern[str] | None], ...]:
    """The rows with their regexes compiled once (the signatures module turns them into signatures)."""
    return tuple((w, re.compile(w.pattern) if w.pattern else None) for w in WORDINGS)
