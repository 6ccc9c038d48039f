"""The fit arithmetic against figures real engines logged (sources in each case), and its warnings.

The configs are the published config.json fields that size a KV cache (values as on the Hugging
Face model pages); the expected numbers are what vLLM / SGLang printed for them.
"""

from __future__ import annotations

import json

import pytest

from console.probes import ParseError
from console.probes.model_config import parse_model_shape
from console.service import fit

GIB = 1 << 30

DEEPSEEK_V2_LITE = {  # deepseek-ai/DeepSeek-V2-Lite-Chat: MLA
    "architectures": ["DeepseekV2ForCausalLM"], "model_type": "deepseek_v2", "hidden_size": 2048,
    "num_hidden_layers": 27, "num_attention_heads": 16, "num_key_value_heads": 16, "kv_lora_rank": 512,
    "q_lora_rank": None, "qk_rope_head_dim": 64, "qk_nope_head_dim": 128, "v_head_dim": 128,
    "n_routed_experts": 64, "torch_dtype": "bfloat16", "max_position_embeddings": 163840}
QWEN3_235B = {  # Qwen/Qwen3-235B-A22B(-FP8): GQA, 4 KV heads
    "architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe", "hidden_size": 4096,
    "num_hidden_layers": 94, "num_attention_heads": 64, "num_key_value_heads": 4, "head_dim": 128,
    "torch_dtype": "bfloat16", "max_position_embeddings": 40960}
QWEN2_14B = {  # deepseek-ai/DeepSeek-R1-Distill-Qwen-14B (Qwen2): GQA, head_dim from hidden/heads
    "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 5120, "num_hidden_layers": 48,
    "num_attention_heads": 40, "num_key_value_heads": 8, "torch_dtype": "bfloat16",
    "max_position_embeddings": 131072}
GLM5 = {  # zai-org/GLM-5 (glm_moe_dsa): MLA + DSA indexer + one MTP layer (transformers GlmMoeDsaConfig defaults)
    "architectures": ["GlmMoeDsaForCausalLM"], "model_type": "glm_moe_dsa", "hidden_size": 6144,
    "num_hidden_layers": 78, "num_attention_heads": 64, "num_key_value_heads": 64, "kv_lora_rank": 512,
    "q_lora_rank": 2048, "qk_rope_head_dim": 64, "qk_nope_head_dim": 192, "v_head_dim": 256,
    "index_head_dim": 128, "index_n_heads": 32, "n_routed_experts": 256, "num_nextn_predict_layers": 1,
    "torch_dtype": "bfloat16", "max_position_embeddings": 202752}
QWEN3_NEXT = {  # Qwen/Qwen3-Next-80B-A3B: gated DeltaNet, full attention every 4th layer
    "architectures": ["Qwen3NextForCausalLM"], "model_type": "qwen3_next", "hidden_size": 2048,
    "num_hidden_layers": 48, "num_attention_heads": 16, "num_key_value_heads": 2, "head_dim": 256,
    "full_attention_interval": 4, "torch_dtype": "bfloat16", "max_position_embeddings": 262144}


def shape(cfg: dict):
    return parse_model_shape(json.dumps(cfg))


def test_mla_one_request_matches_vllm_for_deepseek_v2_lite():
    # vllm-project/vllm#15871 (vLLM 0.8.3): "To serve at least one request with the models's max seq len
    # (32768), (0.95 GiB KV cache is needed ..."
    s = shape(DEEPSEEK_V2_LITE)
    assert s.attention == "mla" and s.attention_layers == 27
    bpt = fit.kv_bytes_per_token(s, "auto", tensor_parallel=1)
    assert bpt == 27 * (512 + 64) * 2
    assert round(32768 * bpt / GIB, 2) == 0.95
    # MLA keeps one latent per token on every rank: tensor parallel does not split it
    assert fit.kv_bytes_per_token(s, "auto", tensor_parallel=8) == bpt


def test_gqa_tokens_match_vllm_for_qwen3_235b_at_tp4():
    # vllm-project/vllm#21348: Qwen3-235B-A22B-FP8 on 4x H100, TP4:
    # "Available KV cache memory: 8.11 GiB" / "GPU KV cache size: 178,880 tokens"
    s = shape(QWEN3_235B)
    bpt = fit.kv_bytes_per_token(s, "auto", tensor_parallel=4)
    assert bpt == 94 * 2 * 1 * 128 * 2  # 4 KV heads over 4 ranks: one per rank
    assert abs(8.11 * GIB / bpt - 178_880) / 178_880 < 0.02  # 8.11 is rounded; vLLM rounds to blocks


def test_gqa_tokens_match_sglang_for_qwen3_235b_at_tp4():
    # same issue, SGLang: "KV Cache is allocated. #tokens: 367404, K size: 8.23 GB, V size: 8.23 GB"
    bpt = fit.kv_bytes_per_token(shape(QWEN3_235B), "auto", tensor_parallel=4)
    assert abs((8.23 + 8.23) * GIB / 367_404 - bpt) / bpt < 0.01


def test_gqa_head_dim_from_hidden_size_matches_vllm_cpu():
    # opea-project/GenAIExamples#1762: R1-Distill-Qwen-14B on vLLM CPU with its default 4 GiB KV space:
    # "the maximum number of tokens that can be stored in KV cache (21840)"
    bpt = fit.kv_bytes_per_token(shape(QWEN2_14B), "auto", tensor_parallel=1)
    assert bpt == 48 * 2 * 8 * 128 * 2
    assert (4 * GIB // bpt) // 16 * 16 == 21_840  # vLLM counts whole 16-token blocks


def test_glm5_sparse_mla_fp8_uses_the_656_byte_format_and_the_indexer():
    s = shape(GLM5)
    assert s.index_head_dim == 128 and s.mtp_layers == 1
    # fp8_ds_mla (vLLM FlashMLA sparse: "custom storage format is 656 bytes") + 132-byte indexer key
    assert fit.kv_bytes_per_token(s, "fp8", 2) == 78 * (656 + 132)
    assert fit.kv_bytes_per_token(s, "fp8", 2, mtp=True) == 79 * (656 + 132)
    assert fit.kv_bytes_per_token(s, "auto", 2) == 78 * ((512 + 64) * 2 + 132)  # bf16 cache: ~1.6x


def test_hybrid_models_cache_only_their_attention_layers():
    s = shape(QWEN3_NEXT)
    assert (s.attention_layers, s.linear_layers) == (12, 36) and s.hybrid
    assert fit.kv_bytes_per_token(s, "auto", 1) == 12 * 2 * 2 * 256 * 2
    typed = shape({**QWEN2_14B, "num_hidden_layers": 4,
                   "layer_types": ["linear_attention", "linear_attention", "linear_attention", "full_attention"]})
    assert (typed.attention_layers, typed.linear_layers) == (1, 3)
    nemo = shape({**QWEN2_14B, "hybrid_override_pattern": "M-M*-M-M*-"})
    assert (nemo.attention_layers, nemo.linear_layers) == (2, 4)
    kimi = shape({**DEEPSEEK_V2_LITE, "linear_attn_config": {"full_attn_layers": [4, 8, 12, 16, 20, 24, 27]}})
    assert (kimi.attention_layers, kimi.linear_layers) == (7, 20)


def test_multimodal_config_reads_the_text_model():
    s = shape({"architectures": ["X"], "model_type": "glm4v", "text_config": {**QWEN2_14B, "model_type": "glm4"}})
    assert s.num_layers == 48 and s.num_kv_heads == 8


@pytest.mark.parametrize("text, part", [
    ("{", "not JSON"),
    ("[1]", "not a JSON object"),
    ('{"hidden_size": 4}', "num_hidden_layers"),
    ('{"num_hidden_layers": 4}', "neither kv_lora_rank"),
])
def test_unusable_configs_are_clear_errors(text, part):
    with pytest.raises(ParseError, match=part):
        parse_model_shape(text)


def _gb300(used_mib: float = 0.0, processes=()) -> fit.StationMemory:
    return fit.StationMemory(256703, False, used_mib=used_mib, processes=tuple(processes))


def _glm_settings(**kw) -> fit.FitSettings:
    flags = {"gpu_memory_utilization": 0.93, "max_model_len": 98304, "max_num_seqs": 16, "kv_cache_dtype": "fp8",
             "speculative_config": '{"method": "mtp", "num_speculative_tokens": 4}', **kw}
    return fit.settings_from_flags("vllm", flags, 2, shape(GLM5))


def test_the_tutorials_setup_fits_and_says_how_many_full_length_requests_fit():
    f = fit.estimate("A", shape(GLM5), 464e9, _glm_settings(), _gb300())
    assert f.fits
    # 464 GB over TP=2 plus the replicated MLA projections: NVIDIA's log says ~218 GiB per GPU
    assert 216 < f.weights_gib < 219
    assert f.settings.mtp and f.bytes_per_token == 79 * 788
    assert 1.5 < f.concurrency < 3 and f.kv_tokens > 98304
    assert [w.id for w in f.warnings] == ["kv-concurrency"]


def test_the_models_full_context_does_not_fit_one_request():
    f = fit.estimate("A", shape(GLM5), 464e9, _glm_settings(max_model_len=1048576), _gb300())
    assert not f.fits
    w = next(w for w in f.warnings if w.severity == "error")
    assert w.id == "kv-cache-too-small" and "--max-model-len 1,048,576" in w.text
    assert "lower --max-model-len to about" in w.fix


def test_memory_held_by_another_process_means_the_weights_do_not_fit():
    held = fit.GpuProcess(4242, "python3", 120 * 1024)
    f = fit.estimate("B", shape(GLM5), 464e9, _glm_settings(), _gb300(120 * 1024, [held]))
    assert not f.fits
    ids = [w.id for w in f.warnings]
    assert ids[:2] == ["gpu-processes", "cuda-oom"] and "pid 4242" in f.warnings[1].text


def test_gb10_page_cache_below_the_utilization_offers_drop_caches_for_vllm():
    gb10 = fit.StationMemory(123904, True, free_mib=60 * 1024, available_mib=115 * 1024, cached_mib=50 * 1024)
    s = fit.settings_from_flags("vllm", {"gpu_memory_utilization": 0.85, "max_model_len": 32768,
                                         "max_num_seqs": 4}, 2, shape(QWEN2_14B))
    f = fit.estimate("A", shape(QWEN2_14B), 30e9, s, gb10)
    w = next(w for w in f.warnings if w.id == "free-memory-at-startup")
    assert w.severity == "error" and "drop_caches" in w.fix and "page cache" in w.text
    # SGLang reads MemAvailable on integrated GPUs: page cache does not hurt it
    s2 = fit.settings_from_flags("sglang", {"mem_fraction_static": 0.85, "context_length": 32768,
                                            "max_running_requests": 4}, 2, shape(QWEN2_14B))
    assert not any(w.id == "free-memory-at-startup" for w in fit.estimate("A", shape(QWEN2_14B), 30e9, s2,
                                                                           gb10).warnings)


def test_settings_defaults_are_named():
    s = fit.settings_from_flags("vllm", {}, 2, shape(QWEN2_14B))
    assert s.memory_fraction == 0.9 and s.max_model_len == 131072 and s.max_num_seqs == 256
    assert len(s.notes) == 3


def test_flags_from_a_launch_script():
    script = """#!/usr/bin/env bash
source ~/glm53.env   # RANK, HEAD_IP
docker run -d --name glm53 --gpus "device=$GPU" \\
  vllm/vllm-openai:v0.30.0 serve /models/GLM --tensor-parallel-size 2 \\
  --max-model-len 98304 --gpu-memory-utilization=0.93 --kv-cache-dtype fp8 \\
  --enable-prefix-caching --max-num-seqs "$SEQS" \\
  --speculative-config '{"method": "mtp", "num_speculative_tokens": 4}'
# --max-model-len 1 (a comment)
"""
    flags = fit.flags_from_script(script)
    assert flags["max_model_len"] == "98304" and flags["gpu_memory_utilization"] == "0.93"
    assert flags["enable_prefix_caching"] is True and "max_num_seqs" not in flags
    s = fit.settings_from_flags("vllm", flags, 1, shape(GLM5), source="launch script")
    assert (s.tensor_parallel, s.max_model_len, s.mtp, s.kv_cache_dtype) == (2, 98304, True, "fp8")


def test_plan_json_shape():
    a = fit.estimate("A", shape(GLM5), 464e9, _glm_settings(), _gb300())
    b = fit.estimate("B", shape(GLM5), 464e9, _glm_settings(max_model_len=1048576), _gb300())
    doc = fit.plan_json([a, b])
    assert set(doc) == {"stations", "fits", "warnings"} and doc["fits"] is False
    assert doc["stations"]["A"]["fits"] is True and doc["stations"]["B"]["fits"] is False
    assert {w["station"] for w in doc["warnings"]} == {"A", "B"}
    json.dumps(doc)
    assert "logged 11.00 GiB" in fit.compare_logged(a, 11.0, 190000)


def test_no_estimate_is_unknown_never_does_not_fit():
    """Before, "does not fit" was printed when no estimate could be made."""
    import io

    from console.commands.plan import print_report
    from console.service.fit import FitWarning
    from console.service.fit_inputs import FitReport

    report = FitReport(fits=[], problems=[FitWarning("model-config", "error", "B", "B: no config.json", "")], memory={})
    assert report.verdict == "unknown" and not report.ok
    out = io.StringIO()
    print_report(report, None, None, out)  # type: ignore[arg-type]
    assert out.getvalue().splitlines()[-1] == "fits: unknown (no estimate for B)"
    assert "does not fit" not in out.getvalue().lower()
    assert FitReport(fits=[], problems=[], memory={}).verdict == "no"  # nothing at all: not "yes"
