"""Overrides and profiles are validated like the config: engine settings have a kind and a
range per engine (console/config/engine_flags.py); a bad value or an unknown key is refused at load with the
file, line and field (exit 2 from the CLI), never turned into a flag; ``extra_args`` stays the way to pass
anything else. Before: ``max_num_seqs = -1`` passed and ``plan`` said "fits" with -98,304 tokens; ``zzz = 1``
became ``--zzz 1``; a profile's ``gpu_memory_utilization = 2.0`` was accepted."""

from __future__ import annotations

import math
import tomllib
from pathlib import Path

import pytest
import tomli_w
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from console.cli import main
from console.config import ConfigError, parse_config
from console.config.engine_flags import FLAGS
from console.secrets import is_secret_name
from console.service import engines, fit
from tests.two_stations import stations_toml

VLLM, SGLANG = "glm53-nvfp4-2x-gb300-vllm", "glm53-flash-nvfp4-2x-gb10-sglang"
BASE = """profile = "{profile}"
[overrides]
{override}
""" + stations_toml(rdma=False)
RT = engines.StationRuntime(("GPU-1",), "img@sha256:" + "a" * 64)


def config(override: str, profile: str = VLLM):
    return parse_config(BASE.format(profile=profile, override=override), "x.toml")


@pytest.mark.parametrize("override,words", [
    ("max_num_seqs = -1", "max_num_seqs: must be >= 1"),
    ('max_num_seqs = "x"', "max_num_seqs: must be an integer"),
    ("max_num_seqs = 1.5", "max_num_seqs: must be an integer"),
    ("max_num_seqs = true", "max_num_seqs: must be an integer"),
    ("max_num_seqs = 1e12", "max_num_seqs: must be an integer"),
    ("max_num_seqs = 1_000_000_000_000", "<= 65536"),
    ("gpu_memory_utilization = 2.0", "gpu_memory_utilization: must be > 0 and <= 1"),
    ("gpu_memory_utilization = 0", "must be > 0"),
    ("gpu_memory_utilization = nan", "finite"),
    ("max_model_len = -98304", "max_model_len: must be >= 1"),
    ("zzz = 1", "overrides.zzz: not a vllm setting the console knows; pass other engine flags in overrides.extra_args"),
    ("served_model_name = \"other\"", "not a vllm setting"),
    ('kv_cache_dtype = "--api-key=x"', "one word"),
    ('speculative_config = "[1]"', "JSON object"),
    ("enforce_eager = 1", "true or false"),
])
def test_bad_overrides_are_refused_with_line_and_field(override, words):
    with pytest.raises(ConfigError) as ei:
        config(override)
    msg = str(ei.value)
    assert words in msg and msg.startswith("x.toml:3: overrides.") and "\n" not in msg, msg


def test_a_secret_named_override_loads_but_never_becomes_a_flag():
    """The config loads (a bundle can still mask and collect it); the command builder refuses it."""
    c = config('hf_token = "hf_x"')
    with pytest.raises(engines.EngineConfigError, match="a secret never goes on a command line"):
        engines.build_launch(c, c.head, RT)


def test_engine_flags_are_per_engine():
    with pytest.raises(ConfigError, match="not a sglang setting"):
        config("max_num_seqs = 8", SGLANG)  # vLLM's name: SGLang calls it max_running_requests
    assert config("max_running_requests = 8", SGLANG).overrides["max_running_requests"] == 8
    assert config("chunked_prefill_size = -1", SGLANG)  # SGLang's documented "off"


def test_known_flags_and_extra_args_still_reach_the_command():
    c = config('max_num_seqs = 8\nenforce_eager = true\nextra_args = ["--zzz", "1"]')
    argv = engines.build_launch(c, c.head, RT).argv
    assert argv[argv.index("--max-num-seqs") + 1] == "8" and "--enforce-eager" in argv
    assert argv[argv.index("--zzz") + 1] == "1"  # the explicit way: passed as written


def test_a_profile_file_is_checked_the_same_way(tmp_path: Path):
    src = (Path(__file__).parents[2] / "console" / "profiles" / f"{VLLM}.toml").read_text()
    bad = tmp_path / "p.toml"
    bad.write_text(src.replace("gpu_memory_utilization = 0.93", "gpu_memory_utilization = 2.0"))
    line = next(i for i, ln in enumerate(bad.read_text().splitlines(), 1) if ln.startswith("gpu_memory_utilization"))
    with pytest.raises(ConfigError) as ei:
        parse_config(BASE.format(profile=str(bad), override=""), str(tmp_path / "c.toml"))
    assert f"p.toml:{line}: serving.gpu_memory_utilization: must be > 0 and <= 1" in str(ei.value)
    bad.write_text(src.replace("max_num_seqs = 16", "zzz = 16"))
    with pytest.raises(ConfigError, match="serving.zzz: not a vllm setting"):
        parse_config(BASE.format(profile=str(bad), override=""), str(tmp_path / "c.toml"))


def test_plan_exits_2_with_one_line(tmp_path: Path, capsys):
    path = tmp_path / "c.toml"
    for override in ("max_num_seqs = -1", "zzz = 1", "gpu_memory_utilization = 2.0"):
        path.write_text(BASE.format(profile=VLLM, override=override))
        try:
            rc = main(["plan", "--config", str(path)])
        except SystemExit as exc:
            rc = exc.code
        err = capsys.readouterr().err
        assert rc == 2 and err.count("\n") == 1 and "Traceback" not in err, err


def test_a_launch_scripts_invalid_numbers_are_not_used_by_the_fit():
    s = fit.settings_from_flags("vllm", {"max_num_seqs": "-1", "gpu_memory_utilization": "2.0"}, 2, None, "script")
    assert s.max_num_seqs == fit.DEFAULT_MAX_NUM_SEQS["vllm"] and 0 < s.memory_fraction <= 1
    assert any("max_num_seqs = -1 is not valid" in n for n in s.notes)


TOML_VALUES = st.one_of(
    st.integers(min_value=-(2**63), max_value=2**63 - 1), st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(), st.text(max_size=30), st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(alphabet="abc", min_size=1, max_size=3), st.integers(), max_size=2),
)
KEYS = st.one_of(st.sampled_from(sorted(FLAGS["vllm"])), st.from_regex(r"[a-z][a-z_]{0,12}", fullmatch=True))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(key=KEYS, value=TOML_VALUES)
def test_any_override_is_refused_or_becomes_a_known_flag_in_range(key, value):
    """Whatever the value: a one-line ConfigError, or a command whose flags are all known and whose fit
    numbers are positive (never a negative KV cache)."""
    data = tomllib.loads(BASE.format(profile=VLLM, override=""))
    data["overrides"] = {key: value}
    text = tomli_w.dumps(data)
    try:
        c = parse_config(text, "x.toml")
    except ConfigError as exc:
        assert "\n" not in str(exc)
        return
    if key in engines.CONTAINER_KEYS:
        return
    if is_secret_name(key):
        with pytest.raises(engines.EngineConfigError):
            engines.build_launch(c, c.head, RT)
        return
    assert key in FLAGS["vllm"], key
    argv = engines.build_launch(c, c.head, RT).argv
    serve = argv[argv.index("serve"):]
    known = {"--" + k.replace("_", "-") for k in FLAGS["vllm"]} | {
        "--served-model-name", "--nnodes", "--node-rank", "--master-addr", "--host", "--port",
        "--tensor-parallel-size", "--headless"}
    assert all(a in known for a in serve if a.startswith("--")), serve
    s = fit.settings_from_flags("vllm", engines.serving_settings(c.profile, c.overrides), 2, None)
    assert s.max_num_seqs >= 1 and 0 < s.memory_fraction <= 1 and s.max_model_len >= 0
    assert all(math.isfinite(x) for x in (s.memory_fraction,))
