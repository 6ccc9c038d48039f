"""The engine settings the console knows, per engine, with their kind and range: the one table that
``[overrides]`` and a profile's ``[serving]`` are checked against (and the fit estimate reads).

Why: an override key becomes an engine flag (``max_num_seqs = 16`` -> ``--max-num-seqs 16``), so a typo
(``zzz = 1`` -> ``--zzz 1``) kills the launch minutes later, and a value out of range (``max_num_seqs =
-1``, ``gpu_memory_utilization = 2.0``) made ``plan`` say "fits" with a negative KV cache. Here a value
is refused at load, with its field and line. Anything else the engine takes goes in ``extra_args``
(a list passed as it is): the explicit way, never a guessed flag.

Pure: no I/O; the one other module it reads is ``secrets`` (a secret-named key is left to the command
builder, which refuses it as a secret: the config still loads, so ``bundle`` can mask and collect it).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any

from console.secrets import is_secret_name

# [overrides] keys that shape the container, not the engine (console.service.engines).
CONTAINER_KEYS = frozenset({"image", "executor", "nccl_ib_gid_index", "nccl_ib_hca", "shm_size", "extra_env",
                            "extra_args", "secret_env", "cap_ptrace", "flight_recorder"})
# Serving keys the command builders consume themselves (never passed through as flags).
CONSUMED = frozenset({"dist_init_port"})

_WORD = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.:/@+=,-]{0,255}")


@dataclass(frozen=True)
class Flag:
    """One setting: ``kind`` is int, float, bool, word (one argv word) or json (an object, as a TOML table
    or a JSON string); ``lo``/``hi`` bound numbers (inclusive; ``lo_open``: ``lo`` itself excluded)."""

    kind: str
    lo: float | None = None
    hi: float | None = None
    lo_open: bool = False
    also: tuple[int, ...] = ()  # values allowed outside the range (SGLang's -1 "off")

    def problem(self, value: Any) -> str | None:
        """What is wrong with ``value`` (None: fine). ``False`` always means "flag not given"."""
        if self.kind == "bool":
            return None if isinstance(value, bool) else f"must be true or false, got {_show(value)}"
        if value is False:
            return None
        if self.kind in ("int", "float"):
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                return f"must be {'an integer' if self.kind == 'int' else 'a number'}, got {_show(value)}"
            if self.kind == "int" and not isinstance(value, int):
                return f"must be an integer, got {_show(value)}"
            if not math.isfinite(value):
                return f"must be a finite number, got {value}"
            if isinstance(value, int) and value in self.also:
                return None
            low_bad = self.lo is not None and (value <= self.lo if self.lo_open else value < self.lo)
            if low_bad or (self.hi is not None and value > self.hi):
                return f"must be {self.range()}, got {_show(value)}"
            return None
        if self.kind == "json":
            if isinstance(value, dict):
                return None
            if isinstance(value, str):
                try:
                    return None if isinstance(json.loads(value), dict) else "must be a JSON object"
                except ValueError:
                    return f"must be a JSON object (a TOML table or a JSON string), got {_show(value)}"
            return f"must be a table or a JSON object string, got {_show(value)}"
        if not isinstance(value, str) or not _WORD.fullmatch(value):
            return f"must be one word (letters, digits, ._:/@+=,-; not starting with '-'), got {_show(value)}"
        return None

    def range(self) -> str:
        lo = "" if self.lo is None else (f"> {self.lo:g}" if self.lo_open else f">= {self.lo:g}")
        hi = "" if self.hi is None else f"<= {self.hi:g}"
        text = " and ".join(x for x in (lo, hi) if x)
        return text + "".join(f" (or {a})" for a in self.also)


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:80] + "…"


_TOKENS = Flag("int", 1, 2**31 - 1)  # a token count: positive, what the engines' int parsing takes
_SEQS = Flag("int", 1, 65536)
_FRACTION = Flag("float", 0, 1, lo_open=True)
_SIZE = Flag("int", 1, 4096)
_WORDS = Flag("word")
_ON = Flag("bool")
_OBJ = Flag("json")

_COMMON: dict[str, Flag] = {
    "kv_cache_dtype": _WORDS, "tool_call_parser": _WORDS, "reasoning_parser": _WORDS, "dtype": _WORDS,
    "quantization": _WORDS, "trust_remote_code": _ON, "chat_template": _WORDS, "load_format": _WORDS,
    "tokenizer": _WORDS, "revision": _WORDS, "download_dir": _WORDS,
}

FLAGS: dict[str, dict[str, Flag]] = {
    # vLLM 0.10-0.11 ``vllm serve`` (EngineArgs / the OpenAI server's arguments)
    "vllm": _COMMON | {
        "max_model_len": _TOKENS, "max_num_seqs": _SEQS, "max_num_batched_tokens": _TOKENS,
        "gpu_memory_utilization": _FRACTION, "enable_prefix_caching": _ON, "enable_chunked_prefill": _ON,
        "speculative_config": _OBJ, "compilation_config": _OBJ, "hf_overrides": _OBJ,
        "override_generation_config": _OBJ, "kv_transfer_config": _OBJ, "limit_mm_per_prompt": _OBJ,
        "enable_auto_tool_choice": _ON, "tensor_parallel_size": _SIZE, "pipeline_parallel_size": _SIZE,
        "data_parallel_size": _SIZE, "enable_expert_parallel": _ON, "enforce_eager": _ON,
        "block_size": Flag("int", 1, 1024), "swap_space": Flag("float", 0, 1024), "cpu_offload_gb": Flag("float", 0, 4096),
        "seed": Flag("int", 0, 2**32 - 1), "max_logprobs": Flag("int", 0, 100000), "generation_config": _WORDS,
        "disable_log_requests": _ON, "disable_log_stats": _ON, "async_scheduling": _ON,
        "disable_custom_all_reduce": _ON, "max_num_partial_prefills": _SIZE,
        "long_prefill_token_threshold": Flag("int", 0, 2**31 - 1), "uvicorn_log_level": _WORDS,
        "api_server_count": _SIZE, "max_seq_len_to_capture": _TOKENS,
    },
    # SGLang 0.5.x ``python3 -m sglang.launch_server`` (ServerArgs)
    "sglang": _COMMON | {
        "context_length": _TOKENS, "max_running_requests": _SEQS, "max_total_tokens": _TOKENS,
        "mem_fraction_static": _FRACTION, "chunked_prefill_size": Flag("int", 1, 2**31 - 1, also=(-1,)),
        "max_prefill_tokens": _TOKENS, "dist_init_port": Flag("int", 1, 65535), "tp": _SIZE, "tp_size": _SIZE,
        "dp_size": _SIZE, "ep_size": _SIZE, "enable_dp_attention": _ON, "speculative_algorithm": _WORDS,
        "speculative_num_steps": Flag("int", 1, 64), "speculative_eagle_topk": Flag("int", 1, 64),
        "speculative_num_draft_tokens": Flag("int", 1, 256), "cuda_graph_max_bs": Flag("int", 1, 65536),
        "disable_cuda_graph": _ON, "attention_backend": _WORDS, "random_seed": Flag("int", 0, 2**32 - 1),
        "schedule_policy": _WORDS, "disable_radix_cache": _ON, "page_size": Flag("int", 1, 4096),
        "log_level": _WORDS, "enable_torch_compile": _ON, "torch_compile_max_bs": Flag("int", 1, 65536),
        "moe_runner_backend": _WORDS, "disable_overlap_schedule": _ON, "watchdog_timeout": Flag("float", 1, 86400),
        "stream_interval": Flag("int", 1, 10000), "enable_mixed_chunk": _ON, "enable_metrics": _ON,
    },
}


def setting_name(key: str) -> str:
    """An override key as the builders read it (``max-num-seqs`` -> ``max_num_seqs``)."""
    return key.replace("-", "_").lstrip("_")


def setting_problem(engine: str, key: str, value: Any) -> str | None:
    """What is wrong with the serving setting ``key = value`` for ``engine`` (None: fine)."""
    known = FLAGS.get(engine, {})
    flag = known.get(setting_name(key))
    if flag is None:
        return (f"not a {engine} setting the console knows; pass other engine flags in "
                f"overrides.extra_args (e.g. extra_args = [\"--{setting_name(key).replace('_', '-')}\", \"...\"]); "
                f"known: {', '.join(sorted(known))}")
    return flag.problem(value)


def serving_problem(engine: str, settings: dict[str, Any], skip: frozenset[str] = CONTAINER_KEYS
                    ) -> tuple[str, str] | None:
    """(key, message) for the first setting of ``settings`` (an [overrides] or [serving] table) that
    ``engine`` cannot take; keys in ``skip`` are not engine settings."""
    for key, value in settings.items():
        if key in skip or is_secret_name(key):  # a secret-named key: the command builder refuses it, in
            continue  # its own words, and the config still loads (a support bundle masks its value)
        if problem := setting_problem(engine, key, value):
            return key, problem
    return None
