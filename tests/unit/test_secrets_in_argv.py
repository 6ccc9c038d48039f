"""The one secret rule on command lines (the process list) and parsed documents: API keys by shape,
a bare ``token=``, an Authorization header's credentials whatever the scheme, keys as well as values."""

from __future__ import annotations

import pytest

from console.secrets import MASK, mask_tree, redact_text, text_masker


@pytest.mark.parametrize(("text", "secret"), [
    ("vllm serve --api-key sk-abcdefghijklmnopqrstu", "abcdefghijklmnopqrstu"),
    ("x --api-key=sk-abcdefghijklmnopqrstu", "abcdefghijklmnopqrstu"),
    ("python a.py sk-proj-abcdefghijklmnopqrstuvwx", "abcdefghijklmnopqrstuvwx"),
    ("serve --hf-token hf_abcdefghijklmnop", "hf_abcdefghijklmnop"),
    ("run token=abc123 x", "abc123"),
    ("run key=abc123 pass=zz9", "abc123"),
    ("curl -H 'Authorization: Basic dXNlcjpwYXNz' u", "dXNlcjpwYXNz"),
    ("curl -H 'Authorization: dXNlcjpwYXNz' u", "dXNlcjpwYXNz"),
    ("Proxy-Authorization: Digest abcdef", "abcdef"),
])
def test_masked(text, secret):
    assert secret not in redact_text(text) and MASK in redact_text(text)


@pytest.mark.parametrize("text", ["unexpected token: '<'", "Missing key: foo", "Basic usage: run it",
                                  "sk-short", "1200 tokens/s"])
def test_prose_is_left_alone(text):
    assert redact_text(text) == text


def test_a_document_keys_and_values():
    doc = {"hf_abcdefghijklmn": 1, "api_key": "plain", "Authorization": "Basic abcabc",
           "nested": [{"env": "HF_TOKEN=hf_zzzzzzzzzzzz"}], 7: None}
    got = mask_tree(doc)
    assert got == {"hf_***": 1, "api_key": MASK, "Authorization": MASK, "nested": [{"env": "HF_TOKEN=***"}], 7: None}


def test_a_document_is_bounded():
    deep: list = []
    cur = deep
    for _ in range(1000):
        cur.append([])
        cur = cur[0]
    assert MASK in str(mask_tree(deep))
    assert mask_tree(list(range(50)), max_nodes=10)[-1] == MASK
    assert mask_tree({"a": object()}) == {"a": MASK}


def test_one_tree_masker_with_the_configs_values():
    """The hang archive's masker (the config's secret values, then the rule) through the same tree walk:
    a known value inside a key or a value, a secret-named key whole, a listed name, and numbers kept."""
    mask = text_masker(["s3cr3t-value"])
    doc = {"s3cr3t-value": "x", "note": "pw is s3cr3t-value", "MY_VAR": "v", "HF_TOKEN": "", "n": 1.5,
           "ranks": {0: {"ops": [1, 2]}}, "t": ("a", "sk-abcdefghijklmnopqrstu")}
    got = mask_tree(doc, mask, listed=("MY_VAR",))
    assert got == {MASK: "x", "note": f"pw is {MASK}", "MY_VAR": MASK, "HF_TOKEN": "", "n": 1.5,
                   "ranks": {0: {"ops": [1, 2]}}, "t": ["a", "sk-***"]}
