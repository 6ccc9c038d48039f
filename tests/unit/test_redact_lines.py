"""The batch masker (``redact_lines``, ``text_masker(...).lines``) masks exactly what the per-line one
does: its quick tests run once over a whole batch, and a line it passes over must be one the per-line
rule leaves as it is. Checked on every log of the fixtures and the held-out set, with secrets of every
shape the per-line tests know mixed in at random places (and at the edges of the batch)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from console.secrets import redact_lines, redact_text, text_masker

ROOT = Path(__file__).resolve().parents[2]
CORPUS = sorted((ROOT / "tests/fixtures/logs").glob("*.log")) + sorted((ROOT / "bench/heldout").rglob("*.log"))
SECRETS = [
    "export HF_TOKEN=hf_abcdefghijklmnop", "Authorization: Bearer abc.def-ghi", "--api-key sk-123456",
    "--hf-token=hf_zzzzzzzzzzzz", "'api_key': 'sk-0000'", "proxy https://user:pw@proxy.example:3128",
    "git clone https://ghp_tokentoken@github.com/x/y", "mysql password: hunter2", "DB_PASS =  s3cret",
    "api_key=['k1']", "token\n", "TOKEN:", "a_token", "PASSWORD", "@", "--", "hf_", "Bearer",
    "token2=abc", "HF_TOKEN_1: hf_12345678ab", "pass-1-2=x", "-1-", "key.9 = 'v'", "Bearer 12345",
    "İstanbul api_key=x",  # (lowercasing it changes its length: the batch falls back to lines)
]
VLLM = ("(Worker_TP1 pid=412) INFO 11-30 14:05:31 [gpu_model_runner.py:2602] Engine 000: Avg prompt "
        "throughput: 0.0 tokens/s, Avg generation throughput: 385.9 tokens/s, Running: 16 reqs")


def _lines() -> list[str]:
    out: list[str] = []
    for path in CORPUS:
        out += path.read_text(errors="replace").splitlines()
    return out


def test_the_corpus_is_there():
    assert len(CORPUS) > 100 and len(_lines()) > 1000


@pytest.mark.parametrize("seed", range(6))
def test_batch_masking_equals_line_masking(seed):
    rng = random.Random(seed)
    lines = _lines() + [VLLM] * 50
    for _ in range(300):  # secrets inside lines, at their ends, alone
        i = rng.randrange(len(lines))
        s = rng.choice(SECRETS).replace("\n", "")
        lines[i] = rng.choice([s, lines[i] + " " + s, s + " " + lines[i], lines[i][:10] + s + lines[i][10:]])
    lines = [s.replace("\n", " ") for s in lines]
    rng.shuffle(lines)
    for size in (1, 3, 4, 50, 5000):
        for start in range(0, len(lines), size * 7 + 1):
            batch = lines[start:start + size]
            assert redact_lines(batch) == [redact_text(s) for s in batch]
    masker = text_masker(["sk-123456", "hunter2", "xy"])
    assert masker.lines(lines) == [masker(s) for s in lines]


def test_lines_of_one_template_are_masked_each_on_its_own():
    # an ASCII batch is tested by template (the lower-cased line without its digits), kept between
    # batches: lines that differ only in their digits must still be masked each as it is
    batch = ["run 1 token=abc", "run 2 token=abd", "step 7 tokens/s 3", "x 1-2", "x --", "KEY9=v", "KEY=v"] * 2
    want = [redact_text(s) for s in batch]
    assert redact_lines(batch) == want == redact_lines(batch)
    assert want[0] == "run 1 token=***" and want[2] == batch[2] and want[6] == "KEY=***"


def test_what_it_finds_is_masked_and_the_rest_left_as_it_is():
    batch = [VLLM] * 10 + ["export HF_TOKEN=hf_abcdefghijklmnop"] + [VLLM] * 10
    out = redact_lines(batch)
    assert out[10] == "export HF_TOKEN=***" and out[:10] == batch[:10] and out[11:] == batch[11:]
    assert redact_lines([VLLM] * 10) == [VLLM] * 10
