"""Serving profiles: the built-in ``console/profiles/*.toml`` or a profile file, checked against the
schema's profile tables (``schema.Profile``: unknown keys are ignored there, profiles grow with the
engines; a ``[[reference_bench]]`` row must not have any)."""

from __future__ import annotations

import math
import os
import re
from importlib import resources
from typing import Any

from console.config.engine_flags import serving_problem
from console.config.errors import (
    NUMBER,
    ConfigError,
    Locator,
    check_type,
    key_path,
    parse_toml,
    show,
    type_name,
)
from console.config.fields import build, table
from console.config.paths import MAX_CONFIG_BYTES
from console.config.schema import BenchRow, GpuProfile, LinkProfile, Profile, ReferenceMethod
from console.config.validate import DEVICE_NAME
from console.safe_files import FileProblem, expand, read_text
from console.sanitize import is_clean

DEFAULT_PROFILE = "glm53-nvfp4-2x-gb300-vllm"
ENGINES = ("vllm", "sglang")
_PROFILE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")


def builtin_profiles() -> list[str]:
    files = resources.files("console.profiles")
    return sorted(p.name[:-5] for p in files.iterdir() if p.name.endswith(".toml"))


def _profile_from_dict(d: dict[str, Any], src: str, text: str = "") -> Profile:
    """A validated Profile; errors name the profile file, the line and the field."""
    loc = Locator(text)

    def err(tbl: str | None, index: int | None, key: str | None, fpath: str, msg: str) -> ConfigError:
        return ConfigError(src, loc.line_of(tbl, index, key) if text else None, fpath, msg)

    def check(raw: dict[str, Any], schema: type, tbl: str | None, index: int | None, prefix: str) -> None:
        for key, (want, required) in table(schema).items():
            fp = f"{prefix}{key}"
            if key not in raw:
                if required:
                    raise err(tbl, index, None, fp, "required field is missing")
                continue
            value = raw[key]
            if not check_type(value, want):
                raise err(tbl, index, key, fp, f"must be {type_name(want)}, got {show(value)}")
            if isinstance(value, float) and not math.isfinite(value):
                raise err(tbl, index, key, fp, f"must be a finite number, got {value}")
            if isinstance(value, int) and not isinstance(value, bool) and not 0 <= value <= 10**12:
                raise err(tbl, index, key, fp, f"out of range: {value}")

    check(d, Profile, None, None, "")
    if not _PROFILE_NAME.fullmatch(d["name"]):
        raise err(None, None, "name", "name", f"must be 1-128 letters, digits, '.', '_' or '-', got {show(d['name'])}")
    for key in ("model", "served_model_name", "image"):  # argv words of the launch command
        value = d.get(key)
        if value is not None and (not value or value.startswith("-") or not value.isprintable()
                                  or any(c.isspace() for c in value)):
            raise err(None, None, key, key, f"must be a word not starting with '-', got {show(value)}")
    model_dir = d.get("model_dir", "")
    if model_dir and (not model_dir.startswith("/") or ":" in model_dir or not model_dir.isprintable()):
        raise err(None, None, "model_dir", "model_dir",
                  f"must be an absolute path without ':' (docker -v), got {show(model_dir)}")
    for key in ("description", "architecture", "quantization", "engine_version"):
        if key in d and not is_clean(d[key]):
            raise err(None, None, key, key, "must not contain control characters")
    if d["engine"] not in ENGINES:
        raise err(None, None, "engine", "engine", f"must be one of {', '.join(ENGINES)}, got {show(d['engine'])}")
    if not 1 <= d.get("api_port", 8000) <= 65535:
        raise err(None, None, "api_port", "api_port", f"must be 1..65535, got {d['api_port']}")
    for key in ("nnodes", "tensor_parallel"):
        if d.get(key, 1) < 1:
            raise err(None, None, key, key, "must be >= 1")
    serving = d.get("serving", {})
    if not isinstance(serving, dict):
        raise err(None, None, "serving", "serving", "must be a table")
    if problem := serving_problem(d["engine"], serving):
        raise err("serving", None, problem[0], f"serving.{key_path(problem[0])}", problem[1])
    g, lk = d["gpu"], d["link"]
    check(g, GpuProfile, "gpu", None, "gpu.")
    check(lk, LinkProfile, "link", None, "link.")
    rails = lk.get("rails", [])
    if not all(isinstance(r, str) and DEVICE_NAME.fullmatch(r) for r in rails):
        raise err("link", None, "rails", "link.rails", "must be a list of RDMA device names like mlx5_0")
    for key in ("name", "extra_display_gpu"):
        if key in g and (not g[key].strip() or not g[key].isprintable()):
            raise err("gpu", None, key, f"gpu.{key}", f"must be a GPU name, got {show(g[key])}")
    gbps = lk.get("rdma_host_gbps", [0.0, 0.0])
    if len(gbps) != 2 or not all(check_type(x, NUMBER) and math.isfinite(x) for x in gbps):
        raise err("link", None, "rdma_host_gbps", "link.rdma_host_gbps", "must be two numbers [low, high]")
    bench_keys = table(BenchRow)
    for i, row in enumerate(d.get("reference_bench", [])):
        if not isinstance(row, dict):
            raise err(None, None, "reference_bench", f"reference_bench[{i}]", "must be a table ([[reference_bench]])")
        check(row, BenchRow, "reference_bench", i, f"reference_bench[{i}].")
        unknown = set(row) - set(bench_keys)
        if unknown:
            key = sorted(unknown)[0]
            raise err("reference_bench", i, key, f"reference_bench[{i}].{key}",
                      f"unknown field (known: {', '.join(bench_keys)})")
    # how reference_bench was measured (bench comparability)
    check(d.get("reference_method", {}), ReferenceMethod, "reference_method", None, "reference_method.")
    return build(Profile, d, served_model_name=d.get("served_model_name", d["model"]))


def load_profile(name_or_path: str) -> Profile:
    """A built-in profile by name, or a profile TOML file by path."""
    if name_or_path.endswith(".toml") or os.sep in name_or_path:
        p = expand(name_or_path)
        try:
            text = read_text(p, MAX_CONFIG_BYTES)
        except FileProblem as exc:
            if not os.path.exists(p):  # the config names a file that is not there: point at the config
                raise ConfigError(None, None, "profile", f"cannot read profile {p}: {exc}") from None
            raise ConfigError(p, None, "", f"cannot read profile: {exc}") from None
        return _profile_from_dict(parse_toml(text, p), str(p), text)
    files = resources.files("console.profiles")
    if not _PROFILE_NAME.fullmatch(name_or_path) or not (res := files / f"{name_or_path}.toml").is_file():
        known = ", ".join(builtin_profiles())
        raise ConfigError(None, None, "profile", f"unknown profile {show(name_or_path)} (built-in: {known})")
    text = res.read_text()
    return _profile_from_dict(parse_toml(text, name_or_path), name_or_path, text)
