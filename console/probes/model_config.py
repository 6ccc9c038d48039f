"""A checkpoint's ``config.json`` -> the shape that decides its KV-cache size per token.

Two attention families keep very different caches (fields as Hugging Face configs spell them):

* **MLA** (DeepSeek-V2/V3, GLM-5 ``glm_moe_dsa``): one compressed latent per token and layer,
  ``kv_lora_rank`` + ``qk_rope_head_dim`` elements, the same on every tensor-parallel rank.
  DeepSeek-V3.2-style sparse attention (DSA; GLM-5) adds an indexer key per token and layer
  (``index_head_dim``).
* **GQA / MHA** (Llama, Qwen, GLM-4.x): K and V per KV head, ``num_key_value_heads`` x
  ``head_dim`` (else ``hidden_size / num_attention_heads``), split over the TP ranks.

Hybrid models keep KV only in their attention layers; linear-attention / state-space layers
(``layer_types``, ``full_attention_interval``, ``hybrid_override_pattern``, ``linear_attn_config``,
``attn_layer_period``) keep a fixed state per request instead. MTP draft layers
(``num_nextn_predict_layers``) add KV layers when speculative decoding uses them. Multimodal
configs nest the language model in ``text_config``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from console.probes import ParseError
from console.probes.disk import config_json, quantization_of

AttentionKind = Literal["mla", "gqa"]

_LINEAR_TYPES = ("linear_attention", "linear", "mamba", "mamba2", "kda", "gated_deltanet", "deltanet", "ssm",
                 "recurrent", "lightning_attention")
_SLIDING_TYPES = ("sliding_attention", "sliding_window", "local_attention", "chunked_attention")


@dataclass(frozen=True)
class ModelShape:
    model_type: str
    architectures: tuple[str, ...]
    num_layers: int  # decoder layers (hidden layers), MTP layers not included
    attention: AttentionKind
    attention_layers: int  # layers that keep a KV cache (all of them unless hybrid)
    linear_layers: int  # linear-attention / state-space layers (a per-request state, no KV)
    sliding_layers: int  # sliding-window attention layers (counted in attention_layers)
    num_kv_heads: int | None  # GQA
    head_dim: int | None  # GQA
    kv_lora_rank: int | None  # MLA latent width
    qk_rope_head_dim: int | None  # MLA rotary part, cached beside the latent
    index_head_dim: int | None  # DSA indexer key width (DeepSeek-V3.2 / GLM-5)
    mtp_layers: int  # num_nextn_predict_layers
    dtype: str  # torch_dtype / dtype ("bfloat16")
    max_position_embeddings: int | None
    hidden_size: int | None
    q_lora_rank: int | None = None
    n_routed_experts: int | None = None
    quantization: str | None = None

    @property
    def hybrid(self) -> bool:
        return self.linear_layers > 0


def _int(d: dict[str, Any], *keys: str) -> int | None:
    for k in keys:
        v = d.get(k)
        if isinstance(v, bool):
            continue
        if isinstance(v, int):
            return v
        if isinstance(v, float) and v.is_integer():
            return int(v)
    return None


def _layer_kinds(d: dict[str, Any], n: int) -> tuple[int, int, int]:
    """(attention layers, linear/state-space layers, sliding-window layers) of ``n`` decoder layers."""
    types = d.get("layer_types")
    if isinstance(types, list) and types and all(isinstance(t, str) for t in types):
        low = [t.lower() for t in types[:n]]
        linear = sum(1 for t in low if any(k in t for k in _LINEAR_TYPES))
        return len(low) - linear, linear, sum(1 for t in low if any(k in t for k in _SLIDING_TYPES))
    lin = d.get("linear_attn_config")
    if isinstance(lin, dict):
        full = lin.get("full_attn_layers")
        if isinstance(full, list):
            return len(full), max(0, n - len(full)), 0
        kda = lin.get("kda_layers")
        if isinstance(kda, list):
            return n - len(kda), len(kda), 0
    pattern = d.get("hybrid_override_pattern")  # Nemotron-H: M = Mamba, * = attention, - = MLP only
    if isinstance(pattern, str) and pattern:
        return pattern.count("*"), pattern.count("M"), 0
    interval = _int(d, "full_attention_interval")  # Qwen3-Next: every Nth layer is full attention
    if interval and interval > 1:
        return n // interval, n - n // interval, 0
    period = _int(d, "attn_layer_period")  # Jamba: one attention layer per period
    if period and period > 1:
        return n // period, n - n // period, 0
    return n, 0, 0


def parse_model_shape(text: str) -> ModelShape:
    """config.json text -> ModelShape; a clear ParseError when the fields that size a KV cache
    are missing (never a guessed number)."""
    data = config_json(text)
    top = data
    d = data.get("text_config") if isinstance(data.get("text_config"), dict) else data
    if d is not data and "num_hidden_layers" not in d:
        d = {**data, **d}
    n = _int(d, "num_hidden_layers", "n_layer", "num_layers")
    if not n or n <= 0:
        raise ParseError("config.json: no num_hidden_layers")
    hidden = _int(d, "hidden_size", "d_model")
    heads = _int(d, "num_attention_heads", "n_head")
    kv_lora = _int(d, "kv_lora_rank")
    rope = _int(d, "qk_rope_head_dim")
    attn_layers, linear, sliding = _layer_kinds(d, n)
    dtype = str(d.get("torch_dtype") or d.get("dtype") or top.get("torch_dtype") or "bfloat16")
    quant = quantization_of(top)
    common: dict[str, Any] = dict(
        model_type=str(d.get("model_type") or top.get("model_type") or ""),
        architectures=tuple(str(a) for a in (top.get("architectures") or d.get("architectures") or ())),
        num_layers=n, attention_layers=attn_layers, linear_layers=linear, sliding_layers=sliding,
        mtp_layers=_int(d, "num_nextn_predict_layers", "mtp_num_hidden_layers") or 0, dtype=dtype,
        max_position_embeddings=_int(d, "max_position_embeddings", "max_sequence_length", "seq_length"),
        hidden_size=hidden, q_lora_rank=_int(d, "q_lora_rank"), n_routed_experts=_int(d, "n_routed_experts"),
        quantization=quant)
    if kv_lora:
        return ModelShape(attention="mla", num_kv_heads=None, head_dim=None, kv_lora_rank=kv_lora,
                          qk_rope_head_dim=rope or 0, index_head_dim=_int(d, "index_head_dim"), **common)
    kv_heads = _int(d, "num_key_value_heads", "num_kv_heads", "multi_query_group_num") or heads
    head_dim = _int(d, "head_dim", "kv_channels")
    if head_dim is None and hidden and heads:
        head_dim = hidden // heads
    if not kv_heads or not head_dim:
        raise ParseError("config.json: neither kv_lora_rank (MLA) nor num_key_value_heads/head_dim (GQA)")
    return ModelShape(attention="gqa", num_kv_heads=kv_heads, head_dim=head_dim, kv_lora_rank=None,
                      qk_rope_head_dim=None, index_head_dim=None, **common)
