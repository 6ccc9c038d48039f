"""Readiness by a first token, and the fit arithmetic, against a real vLLM (CPU build).

/health 200 is not readiness: the console asks for a few tokens at temperature 0 and records the
first one, exactly as a launch does (console.serving.readiness). The same server also checks the
KV bytes-per-token formula: vLLM's own log states how many tokens its KV space holds.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from console.probes.model_config import parse_model_shape
from console.service import fit
from console.serving.client import ApiClient
from console.serving.readiness import NotReady, first_token, served_model

KV_SPACE_GIB = 1  # VLLM_CPU_KVCACHE_SPACE in tests/engine/conftest.py


async def test_ready_means_a_first_token_from_real_vllm(engine) -> None:
    async with ApiClient(engine.url, engine.api_key, timeout=10, stream_timeout=120) as client:
        assert (await client.health()).ok
        model = await served_model(client, "fallback")
        assert model == engine.model
        t0 = time.time()
        tok = await first_token(client, model, time.monotonic() + 120)
    assert tok.tries == 1 and tok.model == engine.model
    assert t0 < tok.at < time.time() and 0 < tok.ttft_ms < 120_000


async def test_a_refused_key_is_not_ready_and_is_not_retried(engine) -> None:
    async with ApiClient(engine.url, "not-the-key", timeout=10, stream_timeout=60) as client:
        assert (await client.health()).ok  # /health is not behind --api-key: it would say "ready"
        t0 = time.monotonic()
        with pytest.raises(NotReady) as err:
            await first_token(client, engine.model, time.monotonic() + 120)
    assert not err.value.retryable and "401" in err.value.detail
    assert time.monotonic() - t0 < 30  # failed at once, not after the deadline


def test_kv_tokens_formula_matches_the_real_engines_log(engine) -> None:
    log = engine.log.read_text(errors="replace")
    m = re.search(r"(?:GPU|CPU) KV cache size: ([\d,]+) tokens", log)
    if m is None:
        kv = [ln for ln in log.splitlines() if "KV" in ln or "blocks" in ln][:8]
        pytest.skip(f"this vLLM build does not log its KV cache size: {kv}")
    logged = int(m.group(1).replace(",", ""))
    config = next(Path(engine.log.parent).rglob("config.json"))
    shape = parse_model_shape(config.read_text())
    bpt = fit.kv_bytes_per_token(shape, "float32", 1)  # the server runs --dtype float32: the cache follows
    expected = KV_SPACE_GIB * (1 << 30) // bpt
    assert abs(expected - logged) / logged < 0.02, (expected, logged, bpt)
