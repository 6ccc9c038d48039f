"""More stations than the profile's nodes: the model is split over all of them. Each rank of a
2x profile on 4 stations loads half the weights the profile states, the launch says TP=4, and the
header describes 4x GB300 (never the profile's 2x name)."""

from __future__ import annotations

import re
import time

import pytest

from console.config import load_profile, parse_config, tensor_parallel_for, weights_per_gpu_gib
from console.service.engines import sglang_args, vllm_serve_args
from console.sim import engine as sim_engine
from console.sim.world import World
from console.ui.screens.dashboard import setup_title

VLLM = "glm53-nvfp4-2x-gb300-vllm"
SGLANG = "glm53-flash-nvfp4-2x-gb10-sglang"


def stations_config(n: int, profile: str = VLLM, extra: str = "") -> str:
    return f'profile = "{profile}"\n{extra}' + "".join(
        f'[[stations]]\nname = "S{i}"\nhost = "127.0.0.{i + 1}"\nrank = {i}\nrail_ip = "198.18.0.{i + 1}"\n'
        for i in range(n))


def played_out(tmp_path, profile: str, n: int, faults=()) -> World:
    w = World.create(str(tmp_path), profile, n, list(faults), 1.0)
    t0 = time.time() - 5000  # long enough ago for every timeline to have played out
    for name in reversed(w.names):
        sim_engine.start_container(w, name, at=t0 if name != w.names[0] else t0 + 5)
    return w


def lines_of(w: World, name: str) -> list[str]:
    return [ln for _, ln in sim_engine.log_lines(w, name, w.state(name), "glm53", now=time.time())]


def test_tensor_parallel_and_weights_follow_the_station_count():
    p = load_profile(VLLM)
    assert tensor_parallel_for(p, 2) == 2 and tensor_parallel_for(p, 4) == 4
    assert weights_per_gpu_gib(p, 2) == pytest.approx(218.0)
    assert weights_per_gpu_gib(p, 4) == pytest.approx(109.0)
    assert parse_config(stations_config(4), "x.toml").tensor_parallel == 4
    assert parse_config(stations_config(2), "x.toml").tensor_parallel == 2
    # an explicit override wins
    over = parse_config(stations_config(4, extra="[overrides]\ntensor_parallel_size = 2\n"), "x.toml")
    assert over.tensor_parallel == 2


@pytest.mark.parametrize("n,expected", [(2, 218.0), (4, 109.0)])
def test_each_simulated_rank_loads_its_share(tmp_path, n, expected):
    w = played_out(tmp_path, VLLM, n)
    for name in w.names:
        took = [ln for ln in lines_of(w, name) if "Model loading took" in ln]
        assert took and f"took {expected:.2f} GiB" in took[0], (name, took)
    head = "\n".join(lines_of(w, w.names[0]))
    assert f"tensor_parallel_size={n}" in head and f'"nnodes": {n}' in head


def test_sglang_ranks_split_too(tmp_path):
    w = played_out(tmp_path, SGLANG, 4)
    text = "\n".join(lines_of(w, w.names[1]))
    assert "tp_size=4" in text and "nnodes=4" in text
    usage = re.search(r"Load weight end\..*mem usage=([0-9.]+) GB", text)
    assert usage and float(usage.group(1)) == pytest.approx(90.5 / 2, abs=0.01)


def test_the_oom_fault_still_stops_the_smaller_load(tmp_path):
    w = played_out(tmp_path, VLLM, 4, ["oom"])
    text = "\n".join(lines_of(w, w.names[1]))
    assert "CUDA out of memory" in text and "Model loading took" not in text


def test_launch_commands_split_over_every_station():
    cfg = parse_config(stations_config(4), "x.toml")
    args = vllm_serve_args(cfg, cfg.stations[1])
    assert args[args.index("--tensor-parallel-size") + 1] == "4" and args[args.index("--nnodes") + 1] == "4"
    cfg = parse_config(stations_config(4, SGLANG), "x.toml")
    args = sglang_args(cfg, cfg.stations[0])
    assert args[args.index("--tp") + 1] == "4" and args[args.index("--nnodes") + 1] == "4"


def test_the_header_describes_the_stations_configured():
    four = setup_title(parse_config(stations_config(4), "x.toml"))
    assert four == "GLM-5.3-NVFP4 on 4x GB300 · vLLM TP=4 · 4 stations"
    assert "2x" not in four
    two = parse_config(stations_config(2, SGLANG).replace('profile =', 'simulated = true\nprofile ='), "x.toml")
    assert setup_title(two, read_only=True) == ("DEMO · GLM-5.3-Flash-NVFP4 on 2x GB10 · SGLang TP=2 · 2 stations"
                                                " · read-only")
