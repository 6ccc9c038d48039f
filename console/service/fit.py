"""Will it fit? Weights per GPU and KV-cache tokens before a load, by arithmetic alone.

A 4-minute load that ends in "KV cache too small" could have been predicted: the engine's own
rules are simple enough to redo before it starts.

* **vLLM** (V1): the engine may use ``--gpu-memory-utilization`` x total memory; what is left
  after the weights and the start-up overhead (the profiling run's activation peak, NCCL and
  cuBLAS buffers, CUDA graphs) becomes the KV cache. At start-up it refuses to run when the free
  memory is below that share ("Free memory on device ... on startup is less than desired GPU memory
  utilization"); on unified memory (GB10) "free" is the kernel's ``MemFree``, so page cache counts
  against it (vllm-project/vllm#48140) and dropping the cache fixes it.
* **SGLang**: ``--mem-fraction-static`` x total holds weights and the KV pool; the pool is what
  is free after the load minus the ``1 - mem_fraction_static`` share; on integrated GPUs SGLang
  reads free memory as ``MemAvailable``.

KV bytes per token and layer (vLLM's KV cache specs, cross-checked against real logs in
tests/unit/test_fit.py):

* MLA: ``(kv_lora_rank + qk_rope_head_dim) x element size``, one latent per token on every
  tensor-parallel rank (not split). With an fp8 cache on DeepSeek-V3.2-style sparse attention
  (GLM-5) vLLM stores ``fp8_ds_mla``: 512 fp8 latent bytes, 4 float32 scales, the 64 rotary
  elements in bf16 = 656 bytes; the DSA indexer adds ``index_head_dim`` fp8 bytes plus one float32
  scale per 128 (132 bytes) in every layer.
* GQA: ``2 (K and V) x max(1, kv_heads // TP) x head_dim x element size``.

Everything here is pure: ``console.service.fit_inputs`` reads the stations, the CLI and the screens print.
"""

from __future__ import annotations

import json
import math
import re
import shlex
from dataclasses import dataclass, field
from typing import Any, Literal

from console.config import engine_flags
from console.probes.model_config import ModelShape

GIB = float(1 << 30)
MIB = float(1 << 20)

# Start-up memory besides weights and KV cache (an estimate, printed as one): the profiling run's
# activation peak plus NCCL/cuBLAS workspaces, and the CUDA graphs (none with --enforce-eager).
ACTIVATION_GIB = 2.5
CUDA_GRAPHS_GIB = 1.5
SGLANG_CONTEXT_GIB = 0.5  # CUDA context and allocator slack before SGLang measures free memory
# Defaults when neither the profile nor the overrides name a value (the engines' own defaults).
VLLM_DEFAULT_UTIL = 0.9
SGLANG_DEFAULT_FRACTION = 0.88
DEFAULT_MAX_NUM_SEQS = {"vllm": 256, "sglang": 48}

Severity = Literal["error", "warning", "info"]
Engine = Literal["vllm", "sglang"]

_FP8 = {"fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc", "fp8_ds_mla", "float8_e4m3fn", "float8_e5m2"}
_BYTES = {"bfloat16": 2.0, "bf16": 2.0, "float16": 2.0, "half": 2.0, "fp16": 2.0, "float32": 4.0, "float": 4.0,
          "fp32": 4.0}
_MTP_METHODS = ("mtp", "deepseek_mtp", "glm4_moe_mtp", "nextn", "eagle", "ernie_mtp", "qwen3_next_mtp")


def element_bytes(kv_cache_dtype: str, model_dtype: str) -> float:
    """Bytes per cached element: ``auto`` follows the model's dtype."""
    d = (kv_cache_dtype or "auto").lower()
    if d in _FP8:
        return 1.0
    if d in ("fp4", "nvfp4", "nvfp4_ds_mla"):
        return 0.5 + 1.0 / 16  # 4-bit values plus one fp8 scale per 16
    if d == "auto":
        return _BYTES.get(model_dtype.lower().replace("torch.", ""), 2.0)
    return _BYTES.get(d, 2.0)


def kv_bytes_per_token(shape: ModelShape, kv_cache_dtype: str = "auto", tensor_parallel: int = 1,
                       mtp: bool = False) -> int:
    """KV-cache bytes one token costs on one GPU, over every layer that keeps a cache."""
    layers = shape.attention_layers + (shape.mtp_layers if mtp else 0)
    dtype = (kv_cache_dtype or "auto").lower()
    elem = element_bytes(dtype, shape.dtype)
    if shape.attention == "mla":
        latent, rope = shape.kv_lora_rank or 0, shape.qk_rope_head_dim or 0
        if shape.index_head_dim and dtype in _FP8:
            per_layer = latent + 4 * math.ceil(latent / 128) + 2 * rope  # fp8_ds_mla
        else:
            per_layer = (latent + rope) * elem
        if shape.index_head_dim:  # the DSA indexer's fp8 key + one float32 scale per 128
            per_layer += shape.index_head_dim + 4 * math.ceil(shape.index_head_dim / 128)
        return int(round(layers * per_layer))
    heads = max(1, (shape.num_kv_heads or 1) // max(1, tensor_parallel))
    return int(round(layers * 2 * heads * (shape.head_dim or 0) * elem))


def replicated_bytes(shape: ModelShape) -> float:
    """Weights every TP rank holds whole (MLA's latent down-projections and the MoE router stay
    replicated in vLLM and SGLang); bf16 in the checkpoints that matter here."""
    if shape.attention != "mla" or not shape.hidden_size:
        return 0.0
    width = (shape.q_lora_rank or 0) + (shape.kv_lora_rank or 0) + (shape.qk_rope_head_dim or 0) \
        + (shape.n_routed_experts or 0)
    return float(shape.num_layers * shape.hidden_size * width * 2)


def weights_per_gpu_bytes(shape: ModelShape, checkpoint_bytes: float, tensor_parallel: int) -> float:
    tp = max(1, tensor_parallel)
    rep = min(replicated_bytes(shape), checkpoint_bytes)
    return (checkpoint_bytes - rep) / tp + rep


# ---------------------------------------------------------------- inputs


@dataclass(frozen=True)
class FitSettings:
    """The serving flags that decide memory, and where they came from."""

    engine: Engine
    tensor_parallel: int
    memory_fraction: float  # --gpu-memory-utilization (vLLM) / --mem-fraction-static (SGLang)
    max_model_len: int
    max_num_seqs: int
    kv_cache_dtype: str = "auto"
    mtp: bool = False
    enforce_eager: bool = False
    source: str = "profile"
    notes: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"engine": self.engine, "tensor_parallel": self.tensor_parallel,
                "memory_fraction": self.memory_fraction, "max_model_len": self.max_model_len,
                "max_num_seqs": self.max_num_seqs, "kv_cache_dtype": self.kv_cache_dtype, "mtp": self.mtp,
                "enforce_eager": self.enforce_eager, "source": self.source, "notes": list(self.notes)}


@dataclass(frozen=True)
class GpuProcess:
    pid: int
    name: str
    used_mib: int | None


@dataclass(frozen=True)
class StationMemory:
    """A station's serving GPU before the launch (GB10: the host's unified memory)."""

    total_mib: float
    unified: bool
    used_mib: float | None = None  # discrete: nvidia-smi memory.used on the serving GPU
    free_mib: float | None = None  # unified: MemFree (what cudaMemGetInfo reports there)
    available_mib: float | None = None  # unified: MemAvailable
    cached_mib: float | None = None  # unified: page cache
    processes: tuple[GpuProcess, ...] = ()  # compute processes on the serving GPU(s)


@dataclass(frozen=True)
class FitWarning:
    id: str  # a finding id where the engine would report one (findings.md), else kv-concurrency / gpu-processes
    severity: Severity
    station: str
    text: str
    fix: str = ""

    def to_json(self) -> dict[str, str]:
        return {"id": self.id, "severity": self.severity, "station": self.station, "text": self.text,
                "fix": self.fix}


@dataclass
class StationFit:
    station: str
    settings: FitSettings
    shape: ModelShape
    checkpoint_gib: float
    weights_gib: float  # per GPU
    total_gib: float
    budget_gib: float  # what the memory fraction grants
    free_gib: float | None  # what the engine will see as free at start
    overhead_gib: float
    kv_gib: float
    bytes_per_token: int
    kv_tokens: int
    one_request_gib: float
    warnings: list[FitWarning] = field(default_factory=list)
    checkpoint_source: str = "station"
    unified: bool = False

    @property
    def fits(self) -> bool:
        return not any(w.severity == "error" for w in self.warnings)

    @property
    def concurrency(self) -> float:
        return self.kv_tokens / self.settings.max_model_len if self.settings.max_model_len else 0.0

    @property
    def all_requests_tokens(self) -> int:
        return self.settings.max_model_len * self.settings.max_num_seqs

    def to_json(self) -> dict[str, Any]:
        s = self.shape
        return {
            "fits": self.fits,
            "weights_gib_per_gpu": round(self.weights_gib, 2),
            "checkpoint_gib": round(self.checkpoint_gib, 2), "checkpoint_source": self.checkpoint_source,
            "memory_total_gib": round(self.total_gib, 2),
            "memory_kind": "unified" if self.unified else "gpu",
            "budget_gib": round(self.budget_gib, 2),
            "free_gib": None if self.free_gib is None else round(self.free_gib, 2),
            "overhead_gib": round(self.overhead_gib, 2),
            "kv_cache_gib": round(self.kv_gib, 2), "kv_tokens": self.kv_tokens,
            "kv_bytes_per_token": self.bytes_per_token,
            "max_model_len": self.settings.max_model_len, "max_num_seqs": self.settings.max_num_seqs,
            "one_request_gib": round(self.one_request_gib, 2),
            "all_requests_tokens": self.all_requests_tokens,
            "concurrency_at_max_len": round(self.concurrency, 2),
            "settings": self.settings.to_json(),
            "model": {"model_type": s.model_type, "layers": s.num_layers, "attention": s.attention,
                      "attention_layers": s.attention_layers, "linear_layers": s.linear_layers,
                      "kv_heads": s.num_kv_heads, "head_dim": s.head_dim, "kv_lora_rank": s.kv_lora_rank,
                      "qk_rope_head_dim": s.qk_rope_head_dim, "index_head_dim": s.index_head_dim,
                      "mtp_layers": s.mtp_layers, "dtype": s.dtype},
            "warnings": [w.to_json() for w in self.warnings],
        }


# ---------------------------------------------------------------- the estimate


def _g(x: float) -> str:
    return f"{x:.1f} GiB"


DROP_CACHES = "sync; echo 3 > /proc/sys/vm/drop_caches (as root) on the station"


def estimate(station: str, shape: ModelShape, checkpoint_bytes: float, settings: FitSettings,
             mem: StationMemory, checkpoint_source: str = "station") -> StationFit:
    s = settings
    total = mem.total_mib / 1024
    weights = weights_per_gpu_bytes(shape, checkpoint_bytes, s.tensor_parallel) / GIB
    bpt = kv_bytes_per_token(shape, s.kv_cache_dtype, s.tensor_parallel, s.mtp)
    budget = s.memory_fraction * total
    warnings: list[FitWarning] = []
    if mem.unified:  # the kernel reclaims page cache for an allocation, but vLLM's start check counts it as used
        free = (mem.free_mib if s.engine == "vllm" else mem.available_mib)
        room = mem.available_mib
    else:
        free = room = None if mem.used_mib is None else mem.total_mib - mem.used_mib
    free_gib = None if free is None else free / 1024
    room_gib = None if room is None else room / 1024
    if s.engine == "vllm":
        overhead = ACTIVATION_GIB + (0.0 if s.enforce_eager else CUDA_GRAPHS_GIB)
        kv = budget - weights - overhead
    else:
        overhead = SGLANG_CONTEXT_GIB
        avail = free_gib if free_gib is not None else total
        kv = avail - weights - overhead - (1 - s.memory_fraction) * total
    kv_tokens = max(0, int(kv * GIB // bpt)) if bpt else 0
    one = s.max_model_len * bpt / GIB
    fit = StationFit(station, s, shape, checkpoint_bytes / GIB, weights, total, budget, free_gib, overhead,
                     kv, bpt, kv_tokens, one, warnings, checkpoint_source, mem.unified)
    flag = "--gpu-memory-utilization" if s.engine == "vllm" else "--mem-fraction-static"
    others = [p for p in mem.processes if p.used_mib]
    held = ", ".join(f"pid {p.pid} {p.name} {p.used_mib / 1024:.1f} GiB" for p in others)
    if others:
        warnings.append(FitWarning(
            "gpu-processes", "warning", station,
            f"{station}: {len(others)} process(es) already hold memory on the serving GPU: {held}",
            "stop them (a leftover container or engine: docker ps -a; kill the pid), or reboot if nothing owns it"))
    if room_gib is not None and weights + overhead > room_gib:
        why = f"{_g(room_gib)} {'available' if mem.unified else 'free'}" + (f" ({held})" if held else "")
        warnings.append(FitWarning(
            "cuda-oom", "error", station,
            f"{station}: the weights ({_g(weights)} per GPU) do not fit: {why}: the load would run out of memory",
            "free the memory first (stop what holds it; reboot if nothing owns it), or more GPUs "
            f"(tensor parallel {s.tensor_parallel} -> {s.tensor_parallel * 2})"))
    elif free_gib is not None and free_gib < budget and (s.engine == "vllm" or mem.unified):
        vllm = s.engine == "vllm"
        warnings.append(FitWarning(
            "free-memory-at-startup", "error" if vllm else "warning", station,
            f"{station}: {_g(free_gib)} free at start, below the {s.memory_fraction:g} x {_g(total)} = {_g(budget)} "
            f"that {flag} asks" + (": vLLM refuses to start" if vllm else "")
            + (f" ({_g((mem.cached_mib or 0) / 1024)} is page cache)" if mem.unified and mem.cached_mib else ""),
            (f"drop the page cache first: {DROP_CACHES}" if mem.unified else "stop what else holds GPU memory")
            + f", or lower {flag}"))
    if not any(w.id == "cuda-oom" for w in warnings):
        if kv <= 0:
            warnings.append(FitWarning(
                "kv-cache-too-small", "error", station,
                f"{station}: weights {_g(weights)} + start-up overhead ~{_g(overhead)} leave no memory for the KV "
                f"cache within {flag} {s.memory_fraction:g} ({_g(budget)})",
                f"raise {flag}, or more GPUs (tensor parallel)"))
        elif one > kv:
            warnings.append(FitWarning(
                "kv-cache-too-small", "error", station,
                f"{station}: one request of --max-model-len {s.max_model_len:,} needs {_g(one)} of KV cache; about "
                f"{_g(kv)} ({kv_tokens:,} tokens) will be left after the weights",
                f"lower --max-model-len to about {kv_tokens // 1024 * 1024:,} or raise {flag}"))
        elif kv_tokens < fit.all_requests_tokens:
            warnings.append(FitWarning(
                "kv-concurrency", "info", station,
                f"{station}: {s.max_num_seqs} sequences x {s.max_model_len:,} tokens = {fit.all_requests_tokens:,} "
                f"tokens; the cache holds about {kv_tokens:,}: {fit.concurrency:.1f} requests at full length at "
                "once (shorter ones share it)", ""))
    if shape.hybrid:
        warnings.append(FitWarning(
            "state-cache", "info", station,
            f"{station}: {shape.linear_layers} of {shape.num_layers} layers are linear-attention / state-space: each "
            "running request also holds a fixed state, so the state cache, not the context, limits concurrency",
            "lower --max-running-requests / --max-num-seqs rather than the context"))
    return fit


def compare_logged(fit: StationFit, logged_gib: float | None, logged_tokens: int | None) -> str:
    """The estimate beside the engine's own figure, e.g. for the timeline's KV-cache line."""
    parts = []
    if logged_gib is not None:
        parts.append(f"logged {logged_gib:.2f} GiB vs estimated {fit.kv_gib:.2f} GiB "
                     f"({_pct(fit.kv_gib, logged_gib)})")
    if logged_tokens is not None:
        parts.append(f"{logged_tokens:,} tokens vs estimated {fit.kv_tokens:,} ({_pct(fit.kv_tokens, logged_tokens)})")
    return "; ".join(parts)


def _pct(est: float, real: float) -> str:
    return f"{(est - real) / real * 100:+.0f}%" if real else "n/a"


# ---------------------------------------------------------------- settings


def _num(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    try:
        return float(str(value))
    except (TypeError, ValueError):
        return None


def _mtp(value: Any) -> bool:
    if value in (None, False, ""):
        return False
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return any(m in value.lower() for m in _MTP_METHODS)
    if isinstance(value, dict):
        method = str(value.get("method") or value.get("model") or "").lower()
        return any(m == method or method.endswith(m) for m in _MTP_METHODS)
    return False


def settings_from_flags(engine: str, flags: dict[str, Any], tensor_parallel: int, shape: ModelShape | None,
                        source: str = "profile") -> FitSettings:
    """Serving settings (underscore names, as in profiles and ``config.overrides``) -> FitSettings,
    with the engines' defaults where a value is not given."""
    notes: list[str] = []
    eng: Engine = "sglang" if engine == "sglang" else "vllm"

    def num(name: str) -> float | None:
        """A number the engine would take (the config's rule, console.config.engine_flags); a launch
        script's value it would refuse (-1, 1.5 sequences, 2.0 of the memory) is said and not used."""
        raw = flags.get(name)
        value = _num(raw)
        if value is None:
            if raw not in (None, True, False, ""):
                notes.append(f"{name} = {str(raw)[:40]} is not a number: not used")
            return None
        flag = engine_flags.FLAGS[eng].get(name)
        typed: Any = int(value) if flag and flag.kind == "int" and value.is_integer() else value
        problem = flag.problem(typed) if flag else None
        if problem or not math.isfinite(value):
            notes.append(f"{name} = {str(raw)[:40]} is not valid ({problem or 'not finite'}): not used")
            return None
        return value

    if eng == "vllm":
        frac = num("gpu_memory_utilization")
        mml = num("max_model_len")
        seqs = num("max_num_seqs")
        tp = num("tensor_parallel_size")
        mtp = _mtp(flags.get("speculative_config"))
    else:
        frac = num("mem_fraction_static")
        mml = num("context_length")
        seqs = num("max_running_requests")
        tp = num("tp") or num("tp_size")
        mtp = str(flags.get("speculative_algorithm") or "").upper() in ("NEXTN", "EAGLE", "EAGLE3")
    if frac is None:
        frac = VLLM_DEFAULT_UTIL if eng == "vllm" else SGLANG_DEFAULT_FRACTION
        notes.append(f"memory fraction not set: the engine's default {frac:g}")
    if mml is None:
        mml = float(shape.max_position_embeddings) if shape and shape.max_position_embeddings else 0.0
        notes.append("max model length not set: the model's max_position_embeddings")
    if seqs is None:
        seqs = float(DEFAULT_MAX_NUM_SEQS[eng])
        notes.append(f"max sequences not set: the engine's default {int(seqs)}")
    return FitSettings(eng, int(tp or tensor_parallel), float(frac), int(mml), int(seqs),
                       str(flags.get("kv_cache_dtype") or "auto"), mtp, bool(flags.get("enforce_eager")),
                       source, tuple(notes))


_FLAG = re.compile(r"^--([a-z0-9][a-z0-9-]*)(?:=(.*))?$")
_SHORT = {"-tp": "tensor_parallel_size"}


def flags_from_script(text: str) -> dict[str, Any]:
    """``--max-model-len 98304`` / ``--gpu-memory-utilization=0.93`` ... in a launch script ->
    {"max_model_len": "98304", ...}. Values that are shell variables (``$LEN``) are left out; a
    flag without a value is True. The last occurrence wins, as for the engines' argparse."""
    joined = re.sub(r"\\\r?\n", " ", text)
    out: dict[str, Any] = {}
    for line in joined.splitlines():
        try:
            words = shlex.split(line, comments=True)
        except ValueError:
            words = line.split()
        for i, w in enumerate(words):
            key = _SHORT.get(w)
            value: str | None = None
            if key is None:
                m = _FLAG.match(w)
                if not m:
                    continue
                key, value = m.group(1).replace("-", "_"), m.group(2)
            if value is None:
                nxt = words[i + 1] if i + 1 < len(words) else None
                value = nxt if nxt is not None and not nxt.startswith("-") else None
                if value is None:
                    out[key] = True
                    continue
            if "$" in value:
                out.pop(key, None)
                continue
            out[key] = value
    return out


def plan_json(fits: list[StationFit], problems: list[FitWarning] | None = None) -> dict[str, Any]:
    """``plan --json``: ``{"stations": {...}, "fits": bool, "warnings": [...]}``."""
    warnings = [w.to_json() for f in fits for w in f.warnings] + [w.to_json() for w in problems or []]
    ok = bool(fits) and all(f.fits for f in fits) and not any(w.severity == "error" for w in problems or [])
    return {"stations": {f.station: f.to_json() for f in fits}, "fits": ok, "warnings": warnings}
