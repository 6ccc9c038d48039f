"""Disk and checkpoint facts: ``df -B1 --output=...``, a shard listing and ``config.json``."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from console.probes import ParseError

DF_FIELDS = "target,size,avail"


@dataclass(frozen=True)
class DiskFree:
    mount: str
    size_bytes: int
    avail_bytes: int


def parse_df(text: str) -> DiskFree:
    """``df -B1 --output=target,size,avail PATH`` (header line, then one row)."""
    rows = [ln.split() for ln in text.strip().splitlines() if ln.strip()]
    for f in rows:
        if len(f) >= 3 and f[-1].isdigit() and f[-2].isdigit():
            return DiskFree(" ".join(f[:-2]), int(f[-2]), int(f[-1]))
    raise ParseError(f"df: no 'MOUNT SIZE AVAIL' row in {text.strip()[:120]!r}")


@dataclass(frozen=True)
class Shards:
    count: int
    total_bytes: int


def parse_shards(text: str) -> Shards:
    """``find DIR -maxdepth 1 -name '*.safetensors' -printf '%s %f\\n'``."""
    sizes = [int(m.group(1)) for m in re.finditer(r"^(\d+) \S+\.safetensors$", text, re.M)]
    return Shards(len(sizes), sum(sizes))


@dataclass(frozen=True)
class ModelConfig:
    architectures: tuple[str, ...]
    quantization: str | None  # quant_algo, else quant_method


def config_json(text: str) -> dict:
    """config.json text -> its top-level object, or a ParseError that says what is wrong."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ParseError(f"config.json: not JSON ({exc.msg} at line {exc.lineno})") from None
    if not isinstance(data, dict):
        raise ParseError("config.json: not a JSON object")
    return data


def quantization_of(data: dict) -> str | None:
    """``quantization_config.quant_algo``, else its ``quant_method``."""
    q = data.get("quantization_config") or {}
    quant = (q.get("quant_algo") or q.get("quant_method")) if isinstance(q, dict) else None
    return str(quant) if quant else None


def parse_model_config(text: str) -> ModelConfig:
    data = config_json(text)
    return ModelConfig(tuple(data.get("architectures") or ()), quantization_of(data))


def parse_sha256sum(text: str) -> dict[str, str]:
    """``sha256sum FILE ...`` -> {basename: digest}."""
    out = {}
    for m in re.finditer(r"^([0-9a-f]{64})\s+\*?(.+)$", text, re.M):
        out[m.group(2).rsplit("/", 1)[-1]] = m.group(1)
    return out
