"""nvidia-smi cells a hostile or broken station prints: nan, inf, -inf, a 400-digit number, negative
values, out-of-range health values. Each is unknown (None) at the parser, once; the row still reads."""

from __future__ import annotations

import json

import pytest

from console import json_out
from console.probes.gpu_health import flags, parse_health_line
from console.probes.nvidia_smi import parse_compute_apps, parse_gpu_line

HOSTILE = ["nan", "NaN", "inf", "-inf", "Infinity", "9" * 400, "1e999", "-5", "-0.5e3", "0x10"]


@pytest.mark.parametrize("cell", HOSTILE)
def test_a_gpu_row_with_a_hostile_cell_reads_as_unknown(cell):
    r = parse_gpu_line(f"0, GPU-1, NVIDIA GB300, {cell}, {cell}, {cell}, {cell}, {cell}")
    assert r.index == 0 and r.uuid == "GPU-1"
    assert (r.memory_used_mib, r.memory_total_mib, r.util_pct, r.temp_c, r.power_w) == (None,) * 5


def test_out_of_range_values_are_unknown_and_good_ones_stay():
    r = parse_gpu_line("0, GPU-1, NVIDIA GB300, 1000, 2000000000000, 101, 250, 100001")
    assert (r.memory_used_mib, r.memory_total_mib, r.util_pct, r.temp_c, r.power_w) == (1000, None, None, None, None)
    r = parse_gpu_line("0, GPU-1, NVIDIA GB300, 1000, 2000, 55, 61, 312.5")
    assert (r.memory_used_mib, r.memory_total_mib, r.util_pct, r.temp_c, r.power_w) == (1000, 2000, 55, 61, 312.5)


def test_a_hostile_index_is_an_error_row():
    for idx in ("nan", "-1", "9" * 400):
        assert parse_gpu_line(f"{idx}, GPU-1, X, 1, 2, 3, 4, 5").error is not None


def test_compute_apps_with_hostile_pids_or_memory():
    apps = parse_compute_apps("GPU-1, nan, python, 10\nGPU-1, -4, python, 10\nGPU-1, 99999999999, x, 1\n"
                              "GPU-1, 12, python, inf\nGPU-1, 13, python, 2048")
    assert [(a.pid, a.used_memory_mib) for a in apps] == [(12, None), (13, 2048)]


def test_hostile_health_values_are_unknown_not_raw():
    h = parse_health_line("0, 00000000:01:00.0, 0x" + "f" * 40 + ", -1, 5, -16, 16, -3, No, No, nan, "
                          "18446744073709551616, 600, 1e999, 2100, 50")
    assert h is not None and h.error is None
    assert (h.reasons, h.pcie_gen, h.pcie_width, h.ecc_uncorrected, h.power_w, h.power_limit_w, h.sm_mhz) == (None,) * 7
    assert (h.pcie_gen_max, h.pcie_width_max, h.sm_max_mhz, h.util_pct) == (5, 16, 2100, 50)
    words = " ".join(f.text for f in flags(h))
    assert "-1" not in words and "-16" not in words and "-3" not in words


def test_strict_json_never_writes_nan_or_infinity():
    doc = {"a": float("nan"), "b": [float("inf"), 1.5, {"c": float("-inf")}], "d": "nan"}
    text = json_out.dumps(doc, indent=1)
    assert json.loads(text) == {"a": None, "b": [None, 1.5, {"c": None}], "d": "nan"}
    assert "NaN" not in text and "Infinity" not in text
    assert json_out.dumps({"x": 1}) == '{"x": 1}'
