"""Build a tiny Llama whose output is known in advance, for the real-vLLM engine tier.

Why it is deterministic: embeddings are one-hot (hidden size >= vocab), attention and MLP
write zero to the residual stream (o_proj and down_proj are zero), so the last hidden state is
the one-hot of the last prompt token; lm_head maps each token to one fixed successor with a
large logit margin. The reply is therefore a chain that depends only on the prompt's last token,
which the chat template picks: ``<think>`` (thinking on), ``</think>`` (thinking off) or
``<|assistant|>`` (tools given). The tokenizer carries GLM's special tokens, so vLLM's own
``glm45`` reasoning parser and ``glm47`` tool parser turn the chains into reasoning, content and
a tool call.

Run with the engine venv's python (numpy, safetensors, tokenizers come with vllm):
``python build_model.py OUTDIR``. ``EXPECTED`` is imported by the tests (no heavy imports here).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

SPECIAL = [
    "<|endoftext|>", "[MASK]", "[gMASK]", "[sMASK]", "<sop>", "<eop>", "<|system|>", "<|user|>",
    "<|assistant|>", "<|observation|>", "<think>", "</think>", "<tool_call>", "</tool_call>",
    "<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>", "<tool_response>", "</tool_response>",
]
# Byte-level token strings ("Ġ" is a leading space), so decoded text is the exact concatenation.
CHAINS = [
    # thinking on: the prompt ends "<|assistant|><think>"
    ["<think>", "The", "Ġuser", "Ġsays", "Ġhello", ".", "</think>",
     "Hello", "Ġoperator", "!", "<|endoftext|>"],
    # thinking off ("<think></think>" ends the prompt) joins the chain above at "</think>"
    # tools given: the prompt ends "<|assistant|>"
    ["<|assistant|>", "Calling", "Ġthe", "Ġtool", "<tool_call>", "get_weather", "<arg_key>", "city",
     "</arg_key>", "<arg_value>", "Paris", "</arg_value>", "</tool_call>", "<|observation|>"],
]
WORDS = ["[UNK]", "hi", "Hi", "Paris", "Ġweather", "Ġin", "?", ",", "Ġhi", "Ġthe"]
EOS = ["<|endoftext|>", "<|user|>", "<|observation|>"]
HIDDEN = 128
HEADS = 4  # head dim 32 (the CPU attention backend wants >= 32)
MARGIN = 60.0  # logit of the successor; every other logit is 0

EXPECTED = {
    "reasoning": "The user says hello.",
    "content": "Hello operator!",
    # generated tokens: 5 reasoning + </think> + 3 content + EOS
    "completion_tokens": 10,
    "reasoning_tokens": 5,
    "no_think_completion_tokens": 4,
    "tool_reasoning": "Calling the tool",
    "tool_name": "get_weather",
    "tool_arguments": {"city": "Paris"},
    "tool_completion_tokens": 13,
}

CHAT_TEMPLATE = (
    "[gMASK]<sop>"
    "{%- if tools -%}<|system|>\n# Tools\n{%- for t in tools %}\n{{ t | tojson }}{%- endfor %}{%- endif -%}"
    "{%- for m in messages -%}"
    "{%- if m.role == 'tool' -%}<|observation|><tool_response>{{ m.content }}</tool_response>"
    "{%- else -%}<|{{ m.role }}|>{{ m.content if m.content is string else '' }}{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}<|assistant|>"
    "{%- if tools -%}"
    "{%- elif enable_thinking is defined and not enable_thinking -%}<think></think>"
    "{%- else -%}<think>{%- endif -%}"
    "{%- endif -%}"
)


def vocab() -> list[str]:
    seen: list[str] = []
    for tok in SPECIAL + [t for c in CHAINS for t in c] + WORDS:
        if tok not in seen:
            seen.append(tok)
    assert len(seen) <= HIDDEN, "one-hot embeddings need hidden size >= vocab"
    return seen


def successors(tokens: list[str]) -> dict[int, int]:
    ids = {t: i for i, t in enumerate(tokens)}
    nxt: dict[int, int] = {}
    for chain in CHAINS:
        for a, b in zip(chain, chain[1:], strict=False):
            assert nxt.get(ids[a], ids[b]) == ids[b], f"{a} already has another successor"
            nxt[ids[a]] = ids[b]
    return nxt


def build(out: Path) -> None:
    import numpy as np
    from safetensors.numpy import save_file
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    out.mkdir(parents=True, exist_ok=True)
    tokens = vocab()
    v = len(tokens)
    nxt = successors(tokens)
    eos_ids = [tokens.index(t) for t in EOS]

    tok = Tokenizer(models.WordLevel({t: i for i, t in enumerate(tokens)}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens(SPECIAL)
    tok.save(str(out / "tokenizer.json"))
    (out / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": 4096,
        "eos_token": "<|endoftext|>", "pad_token": "<|endoftext|>", "unk_token": "[UNK]",
        "chat_template": CHAT_TEMPLATE, "clean_up_tokenization_spaces": False,
    }, indent=1))
    (out / "special_tokens_map.json").write_text(json.dumps(
        {"eos_token": "<|endoftext|>", "pad_token": "<|endoftext|>", "unk_token": "[UNK]"}))

    inter = 64
    cfg = {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": v,
        "hidden_size": HIDDEN, "intermediate_size": inter, "num_hidden_layers": 1,
        "num_attention_heads": HEADS, "num_key_value_heads": HEADS, "head_dim": HIDDEN // HEADS,
        "max_position_embeddings": 4096, "rms_norm_eps": 1e-6, "rope_theta": 10000.0,
        "hidden_act": "silu", "tie_word_embeddings": False, "torch_dtype": "float32",
        "bos_token_id": tokens.index("[gMASK]"), "eos_token_id": eos_ids,
        "pad_token_id": tokens.index("<|endoftext|>"), "attention_bias": False, "mlp_bias": False,
    }
    (out / "config.json").write_text(json.dumps(cfg, indent=1))
    (out / "generation_config.json").write_text(json.dumps(
        {"eos_token_id": eos_ids, "pad_token_id": cfg["pad_token_id"]}))

    f32 = np.float32
    embed = np.zeros((v, HIDDEN), f32)
    embed[np.arange(v), np.arange(v)] = 1.0
    # After RMSNorm a one-hot e_i becomes sqrt(HIDDEN) * e_i; scale so the successor logit is MARGIN.
    head = np.zeros((v, HIDDEN), f32)
    for a, b in nxt.items():
        head[b, a] = MARGIN / np.sqrt(HIDDEN)
    for i in range(v):  # tokens off every chain continue to EOS, so no reply runs forever
        if i not in nxt:
            head[eos_ids[0], i] = MARGIN / np.sqrt(HIDDEN)
    rng = np.random.default_rng(0)
    p = "model.layers.0."
    tensors = {
        "model.embed_tokens.weight": embed,
        "model.norm.weight": np.ones(HIDDEN, f32),
        "lm_head.weight": head,
        p + "input_layernorm.weight": np.ones(HIDDEN, f32),
        p + "post_attention_layernorm.weight": np.ones(HIDDEN, f32),
        # q/k/v are arbitrary: o_proj = 0 makes the attention output zero anyway
        p + "self_attn.q_proj.weight": rng.normal(0, 0.02, (HIDDEN, HIDDEN)).astype(f32),
        p + "self_attn.k_proj.weight": rng.normal(0, 0.02, (HIDDEN, HIDDEN)).astype(f32),
        p + "self_attn.v_proj.weight": rng.normal(0, 0.02, (HIDDEN, HIDDEN)).astype(f32),
        p + "self_attn.o_proj.weight": np.zeros((HIDDEN, HIDDEN), f32),
        p + "mlp.gate_proj.weight": rng.normal(0, 0.02, (inter, HIDDEN)).astype(f32),
        p + "mlp.up_proj.weight": rng.normal(0, 0.02, (inter, HIDDEN)).astype(f32),
        p + "mlp.down_proj.weight": np.zeros((HIDDEN, inter), f32),
    }
    save_file(tensors, str(out / "model.safetensors"), metadata={"format": "pt"})


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: build_model.py OUTDIR")
    build(Path(sys.argv[1]))
