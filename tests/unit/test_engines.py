"""Launch command builders against golden command lines (reviewed by hand against the NVIDIA
tutorial flags in shared/reference/stations.md and the engine docs in engines.md).

Each golden is written the way the preview shows it (one flag per line); ``_lines`` joins it into
the single shell line that runs, so the preview and the command are checked together.
"""

from __future__ import annotations

import dataclasses
import shlex

import pytest

from console.config import parse_config
from console.service import engines
from tests.two_stations import TWO_STATIONS


def _lines(text: str) -> str:
    return " ".join(ln.strip().removesuffix("\\").strip() for ln in text.strip().splitlines())


CONFIG = """
profile = "{profile}"
{extra}
""" + TWO_STATIONS
VLLM = "glm53-nvfp4-2x-gb300-vllm"
SGLANG = "glm53-flash-nvfp4-2x-gb10-sglang"
RT_VLLM = engines.StationRuntime(("GPU-1111",), "vllm/vllm-openai@sha256:" + "ab" * 32)
RT_SGLANG = engines.StationRuntime(("GPU-2222",), "lmsysorg/sglang@sha256:" + "cd" * 32)


def cfg(profile: str = VLLM, extra: str = ""):
    return parse_config(CONFIG.format(profile=profile, extra=extra))


VLLM_A = _lines(r"""
docker run \
    -d \
    --name glm53 \
    --network host \
    --ipc host \
    --ulimit memlock=-1 \
    --ulimit stack=67108864 \
    --gpus device=GPU-1111 \
    --device /dev/infiniband \
    --cap-add SYS_PTRACE \
    -v /models/GLM-5.3-NVFP4:/models/GLM-5.3-NVFP4:ro \
    -e NCCL_DEBUG=INFO \
    -e NCCL_SOCKET_IFNAME=enp1s0f1np1 \
    -e GLOO_SOCKET_IFNAME=enp1s0f1np1 \
    -e TP_SOCKET_IFNAME=enp1s0f1np1 \
    -e NCCL_IB_HCA=mlx5_0 \
    -e VLLM_HOST_IP=198.18.0.1 \
    -e TORCH_NCCL_TRACE_BUFFER_SIZE=2000 \
    -e TORCH_FR_BUFFER_SIZE=2000 \
    -e TORCH_NCCL_DUMP_ON_TIMEOUT=1 \
    -e TORCH_NCCL_DEBUG_INFO_TEMP_FILE=/tmp/dgx-console-fr-rank_ \
    -e TORCH_FR_DUMP_TEMP_FILE=/tmp/dgx-console-fr-rank_ \
    -e TORCH_NCCL_DEBUG_INFO_PIPE_FILE=/tmp/dgx-console-fr-pipe_ \
    --entrypoint vllm \
    vllm/vllm-openai@sha256:abababababababababababababababababababababababababababababababab serve /models/GLM-5.3-NVFP4 \
    --served-model-name glm-5.3 \
    --tensor-parallel-size 2 \
    --nnodes 2 \
    --node-rank 0 \
    --master-addr 198.18.0.1 \
    --host 0.0.0.0 \
    --port 8000 \
    --max-model-len 98304 \
    --gpu-memory-utilization 0.93 \
    --kv-cache-dtype fp8 \
    --enable-prefix-caching \
    --speculative-config '{"method": "mtp", "num_speculative_tokens": 4}' \
    --max-num-seqs 16 \
    --tool-call-parser glm47 \
    --reasoning-parser glm47 \
    --enable-auto-tool-choice
""")

VLLM_B = _lines(r"""
docker run \
    -d \
    --name glm53 \
    --network host \
    --ipc host \
    --ulimit memlock=-1 \
    --ulimit stack=67108864 \
    --gpus device=GPU-1111 \
    --device /dev/infiniband \
    --cap-add SYS_PTRACE \
    -v /models/GLM-5.3-NVFP4:/models/GLM-5.3-NVFP4:ro \
    -e NCCL_DEBUG=INFO \
    -e NCCL_SOCKET_IFNAME=enp1s0f1np1 \
    -e GLOO_SOCKET_IFNAME=enp1s0f1np1 \
    -e TP_SOCKET_IFNAME=enp1s0f1np1 \
    -e NCCL_IB_HCA=mlx5_0 \
    -e VLLM_HOST_IP=198.18.0.2 \
    -e TORCH_NCCL_TRACE_BUFFER_SIZE=2000 \
    -e TORCH_FR_BUFFER_SIZE=2000 \
    -e TORCH_NCCL_DUMP_ON_TIMEOUT=1 \
    -e TORCH_NCCL_DEBUG_INFO_TEMP_FILE=/tmp/dgx-console-fr-rank_ \
    -e TORCH_FR_DUMP_TEMP_FILE=/tmp/dgx-console-fr-rank_ \
    -e TORCH_NCCL_DEBUG_INFO_PIPE_FILE=/tmp/dgx-console-fr-pipe_ \
    --entrypoint vllm \
    vllm/vllm-openai@sha256:abababababababababababababababababababababababababababababababab serve /models/GLM-5.3-NVFP4 \
    --served-model-name glm-5.3 \
    --tensor-parallel-size 2 \
    --nnodes 2 \
    --node-rank 1 \
    --master-addr 198.18.0.1 \
    --headless \
    --max-model-len 98304 \
    --gpu-memory-utilization 0.93 \
    --kv-cache-dtype fp8 \
    --enable-prefix-caching \
    --speculative-config '{"method": "mtp", "num_speculative_tokens": 4}' \
    --max-num-seqs 16 \
    --tool-call-parser glm47 \
    --reasoning-parser glm47 \
    --enable-auto-tool-choice
""")

VLLM_RAY_A = 'IFS= read -r VLLM_API_KEY && export VLLM_API_KEY && exec ' + _lines(r"""
docker run \
    -d \
    --name glm53 \
    --network host \
    --ipc host \
    --ulimit memlock=-1 \
    --ulimit stack=67108864 \
    --gpus device=GPU-1111 \
    --device /dev/infiniband \
    --cap-add SYS_PTRACE \
    -v /models/GLM-5.3-NVFP4:/models/GLM-5.3-NVFP4:ro \
    -e NCCL_DEBUG=INFO \
    -e NCCL_SOCKET_IFNAME=enp1s0f1np1 \
    -e GLOO_SOCKET_IFNAME=enp1s0f1np1 \
    -e TP_SOCKET_IFNAME=enp1s0f1np1 \
    -e NCCL_IB_HCA=mlx5_0 \
    -e VLLM_HOST_IP=198.18.0.1 \
    -e TORCH_NCCL_TRACE_BUFFER_SIZE=2000 \
    -e TORCH_FR_BUFFER_SIZE=2000 \
    -e TORCH_NCCL_DUMP_ON_TIMEOUT=1 \
    -e TORCH_NCCL_DEBUG_INFO_TEMP_FILE=/tmp/dgx-console-fr-rank_ \
    -e TORCH_FR_DUMP_TEMP_FILE=/tmp/dgx-console-fr-rank_ \
    -e TORCH_NCCL_DEBUG_INFO_PIPE_FILE=/tmp/dgx-console-fr-pipe_ \
    -e VLLM_API_KEY \
    --entrypoint bash \
    vllm/vllm-openai@sha256:abababababababababababababababababababababababababababababababab \
    -c 'ray start --head --port=6379 --node-ip-address=198.18.0.1 && exec vllm "$@"' vllm serve /models/GLM-5.3-NVFP4 \
    --served-model-name glm-5.3 \
    --tensor-parallel-size 2 \
    --distributed-executor-backend ray \
    --host 0.0.0.0 \
    --port 8000 \
    --max-model-len 98304 \
    --gpu-memory-utilization 0.93 \
    --kv-cache-dtype fp8 \
    --enable-prefix-caching \
    --speculative-config '{"method": "mtp", "num_speculative_tokens": 4}' \
    --max-num-seqs 16 \
    --tool-call-parser glm47 \
    --reasoning-parser glm47 \
    --enable-auto-tool-choice
""")

VLLM_RAY_B = _lines(r"""
docker run \
    -d \
    --name glm53 \
    --network host \
    --ipc host \
    --ulimit memlock=-1 \
    --ulimit stack=67108864 \
    --gpus device=GPU-1111 \
    --device /dev/infiniband \
    --cap-add SYS_PTRACE \
    -v /models/GLM-5.3-NVFP4:/models/GLM-5.3-NVFP4:ro \
    -e NCCL_DEBUG=INFO \
    -e NCCL_SOCKET_IFNAME=enp1s0f1np1 \
    -e GLOO_SOCKET_IFNAME=enp1s0f1np1 \
    -e TP_SOCKET_IFNAME=enp1s0f1np1 \
    -e NCCL_IB_HCA=mlx5_0 \
    -e VLLM_HOST_IP=198.18.0.2 \
    -e TORCH_NCCL_TRACE_BUFFER_SIZE=2000 \
    -e TORCH_FR_BUFFER_SIZE=2000 \
    -e TORCH_NCCL_DUMP_ON_TIMEOUT=1 \
    -e TORCH_NCCL_DEBUG_INFO_TEMP_FILE=/tmp/dgx-console-fr-rank_ \
    -e TORCH_FR_DUMP_TEMP_FILE=/tmp/dgx-console-fr-rank_ \
    -e TORCH_NCCL_DEBUG_INFO_PIPE_FILE=/tmp/dgx-console-fr-pipe_ \
    --entrypoint bash \
    vllm/vllm-openai@sha256:abababababababababababababababababababababababababababababababab \
    -c 'until ray start --block --address=198.18.0.1:6379 --node-ip-address=198.18.0.2; do sleep 5; done' vllm
""")

SGLANG_A = 'IFS= read -r SGLANG_API_KEY && export SGLANG_API_KEY && exec ' + _lines(r"""
docker run \
    -d \
    --name glm53 \
    --network host \
    --ipc host \
    --ulimit memlock=-1 \
    --ulimit stack=67108864 \
    --gpus device=GPU-2222 \
    --device /dev/infiniband \
    --cap-add SYS_PTRACE \
    -v /models/GLM-5.3-Flash-NVFP4:/models/GLM-5.3-Flash-NVFP4:ro \
    -e NCCL_DEBUG=INFO \
    -e NCCL_SOCKET_IFNAME=enp1s0f1np1 \
    -e GLOO_SOCKET_IFNAME=enp1s0f1np1 \
    -e TP_SOCKET_IFNAME=enp1s0f1np1 \
    -e NCCL_IB_HCA=mlx5_0 \
    -e SGLANG_HOST_IP=198.18.0.1 \
    -e TORCH_NCCL_TRACE_BUFFER_SIZE=2000 \
    -e TORCH_FR_BUFFER_SIZE=2000 \
    -e TORCH_NCCL_DUMP_ON_TIMEOUT=1 \
    -e TORCH_NCCL_DEBUG_INFO_TEMP_FILE=/tmp/dgx-console-fr-rank_ \
    -e TORCH_FR_DUMP_TEMP_FILE=/tmp/dgx-console-fr-rank_ \
    -e TORCH_NCCL_DEBUG_INFO_PIPE_FILE=/tmp/dgx-console-fr-pipe_ \
    -e SGLANG_API_KEY \
    --entrypoint sh \
    lmsysorg/sglang@sha256:cdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcd \
    -c 'umask 077 && python3 -c "$0" && unset SGLANG_API_KEY && exec "$@" --config /tmp/dgx-console-sglang-secrets.yaml' 'import json, os; open("/tmp/dgx-console-sglang-secrets.yaml", "w").write(json.dumps({"api-key": os.environ["SGLANG_API_KEY"]}))' python3 \
    -m sglang.launch_server \
    --model-path /models/GLM-5.3-Flash-NVFP4 \
    --served-model-name glm-5.3-flash \
    --tp 2 \
    --dist-init-addr 198.18.0.1:20000 \
    --nnodes 2 \
    --node-rank 0 \
    --host 0.0.0.0 \
    --port 30000 \
    --mem-fraction-static 0.84 \
    --max-running-requests 2 \
    --context-length 65536 \
    --tool-call-parser glm47 \
    --reasoning-parser glm45
""")

SGLANG_B = _lines(r"""
docker run \
    -d \
    --name glm53 \
    --network host \
    --ipc host \
    --ulimit memlock=-1 \
    --ulimit stack=67108864 \
    --gpus device=GPU-2222 \
    --device /dev/infiniband \
    --cap-add SYS_PTRACE \
    -v /models/GLM-5.3-Flash-NVFP4:/models/GLM-5.3-Flash-NVFP4:ro \
    -e NCCL_DEBUG=INFO \
    -e NCCL_SOCKET_IFNAME=enp1s0f1np1 \
    -e GLOO_SOCKET_IFNAME=enp1s0f1np1 \
    -e TP_SOCKET_IFNAME=enp1s0f1np1 \
    -e NCCL_IB_HCA=mlx5_0 \
    -e SGLANG_HOST_IP=198.18.0.2 \
    -e TORCH_NCCL_TRACE_BUFFER_SIZE=2000 \
    -e TORCH_FR_BUFFER_SIZE=2000 \
    -e TORCH_NCCL_DUMP_ON_TIMEOUT=1 \
    -e TORCH_NCCL_DEBUG_INFO_TEMP_FILE=/tmp/dgx-console-fr-rank_ \
    -e TORCH_FR_DUMP_TEMP_FILE=/tmp/dgx-console-fr-rank_ \
    -e TORCH_NCCL_DEBUG_INFO_PIPE_FILE=/tmp/dgx-console-fr-pipe_ \
    lmsysorg/sglang@sha256:cdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcd python3 \
    -m sglang.launch_server \
    --model-path /models/GLM-5.3-Flash-NVFP4 \
    --served-model-name glm-5.3-flash \
    --tp 2 \
    --dist-init-addr 198.18.0.1:20000 \
    --nnodes 2 \
    --node-rank 1 \
    --host 0.0.0.0 \
    --port 30000 \
    --mem-fraction-static 0.84 \
    --max-running-requests 2 \
    --context-length 65536 \
    --tool-call-parser glm47 \
    --reasoning-parser glm45
""")


@pytest.mark.parametrize("profile, extra, key, rt, station, golden", [
    (VLLM, "", False, RT_VLLM, "A", VLLM_A),
    (VLLM, "", False, RT_VLLM, "B", VLLM_B),
    (VLLM, '[overrides]\nexecutor = "ray"\n', True, RT_VLLM, "A", VLLM_RAY_A),
    (VLLM, '[overrides]\nexecutor = "ray"\n', True, RT_VLLM, "B", VLLM_RAY_B),
    (SGLANG, "", True, RT_SGLANG, "A", SGLANG_A),
    (SGLANG, "", True, RT_SGLANG, "B", SGLANG_B),
])
def test_golden_command_lines(profile, extra, key, rt, station, golden):
    c = cfg(profile, extra)
    spec = engines.build_launch(c, c.station(station), rt, api_key_set=key)
    assert spec.command() == golden
    secret_prefix = "".join(f"{n}=*** " for n in spec.secret_env)
    assert _lines(spec.preview()) == secret_prefix + _lines(golden.split("exec ", 1)[-1] if key and station == "A"
                                                            else golden)


def test_every_argument_is_quoted_and_round_trips():
    # (an override value must be one word: the hostile words travel in extra_args)
    c = cfg(VLLM, '[overrides]\nextra_args = ["--served-model-name", "glm 5.3; rm -rf /", "--uvicorn-log-level", '
                  '"$(id)"]\n')
    spec = engines.build_launch(c, c.head, RT_VLLM)
    assert shlex.split(spec.command()) == list(spec.argv)
    assert "'glm 5.3; rm -rf /'" in spec.command() and "'$(id)'" in spec.command()


def test_overrides_change_flags_and_container_settings():
    c = cfg(VLLM, '[overrides]\nmax_num_seqs = 32\nenable_prefix_caching = false\nnccl_ib_gid_index = 3\n'
                  'shm_size = "16g"\nextra_env = { NCCL_IB_TC = "106" }\n')
    argv = engines.build_launch(c, c.head, RT_VLLM).argv
    line = " ".join(argv)
    assert "--max-num-seqs 32" in line and "--max-num-seqs 16" not in line
    assert "--enable-prefix-caching" not in argv
    assert "NCCL_IB_GID_INDEX=3" in argv and "NCCL_IB_TC=106" in argv
    assert argv[argv.index("--shm-size") + 1] == "16g" and "--ipc" not in argv


def test_several_gpus_per_station_use_the_quoted_device_list():
    c = cfg()
    rt = engines.StationRuntime(("GPU-a", "GPU-b"), RT_VLLM.image)
    argv = engines.build_launch(c, c.head, rt).argv
    assert argv[argv.index("--gpus") + 1] == '"device=GPU-a,GPU-b"'
    assert "all" not in argv[argv.index("--gpus") + 1]


def test_api_key_is_an_env_name_only_and_the_preview_masks_it():
    c = cfg()
    spec = engines.build_launch(c, c.head, RT_VLLM, api_key_set=True)
    assert spec.secret_env == ("VLLM_API_KEY",)
    assert "--api-key" not in spec.argv  # vLLM reads VLLM_API_KEY itself: no key in any argv
    assert spec.argv[spec.argv.index("VLLM_API_KEY") - 1] == "-e"
    assert spec.preview().startswith("VLLM_API_KEY=*** docker run")
    worker = engines.build_launch(c, c.station("B"), RT_VLLM, api_key_set=True)
    assert worker.secret_env == () and "VLLM_API_KEY" not in worker.command()


def test_missing_rail_ip_is_a_clear_error():
    c = parse_config(CONFIG.format(profile=VLLM, extra="").replace('rail_ip = "198.18.0.1"\n', ""))
    with pytest.raises(engines.EngineConfigError, match="station A: rail_ip is not set"):
        engines.build_launch(c, c.station("B"), RT_VLLM)


def test_bad_executor_is_a_clear_error():
    with pytest.raises(engines.EngineConfigError, match="'ray' is only for vLLM"):
        c = cfg(SGLANG, '[overrides]\nexecutor = "ray"\n')
        engines.build_launch(c, c.head, RT_SGLANG)
    with pytest.raises(engines.EngineConfigError, match="must be 'mp' or 'ray'"):
        c = cfg(VLLM, '[overrides]\nexecutor = "mpi"\n')
        engines.build_launch(c, c.head, RT_VLLM)


GPUS = [(0, "GPU-rtx", "NVIDIA RTX PRO 6000 Blackwell Workstation Edition"), (1, "GPU-gb300", "NVIDIA GB300")]


def test_pick_gpus_skips_the_display_gpu_and_honours_the_station_choice():
    c = cfg()
    assert engines.pick_gpus(c.head, c.profile, GPUS) == ("GPU-gb300",)
    chosen = dataclasses.replace(c.head, gpu="GPU-rtx")
    assert engines.pick_gpus(chosen, c.profile, GPUS) == ("GPU-rtx",)
    with pytest.raises(engines.EngineConfigError, match="needs 1 GPU"):
        engines.pick_gpus(c.head, c.profile, GPUS[:1])


def test_markers_per_engine():
    assert engines.ready_marker(cfg()) == "Application startup complete."
    assert engines.ready_marker(cfg(SGLANG)) == "The server is fired up and ready to roll!"
    c = cfg()
    assert engines.started_marker(c, c.station("B")) == "headless multiproc executor"


def test_ray_worker_has_no_start_line_to_wait_for():
    c = cfg(VLLM, '[overrides]\nexecutor = "ray"\n')
    assert engines.started_marker(c, c.station("B")) == ""
    assert engines.started_marker(c, c.head) == "Ray runtime started"


ONE_STATION = """
profile = "{profile}"

[[stations]]
name = "solo"
host = "localhost"
rank = 0
"""


@pytest.mark.parametrize("profile", [VLLM, SGLANG])
def test_one_station_needs_no_rail_and_gets_no_multi_node_flags(profile):
    c = parse_config(ONE_STATION.format(profile=profile))
    rt = engines.StationRuntime(("GPU-a", "GPU-b"), RT_VLLM.image)
    argv = engines.build_launch(c, c.head, rt).argv
    for flag in ("--nnodes", "--node-rank", "--master-addr", "--headless", "--dist-init-addr"):
        assert flag not in argv
    assert not any(a.startswith(("NCCL_SOCKET_IFNAME", "VLLM_HOST_IP", "SGLANG_HOST_IP", "NCCL_IB_HCA"))
                   for a in argv)
    assert "NCCL_DEBUG=INFO" in argv and argv[argv.index("--gpus") + 1] == '"device=GPU-a,GPU-b"'
    gpus = [(0, "GPU-a", c.profile.gpu.name), (1, "GPU-b", c.profile.gpu.name)]
    assert engines.pick_gpus(c.head, c.profile, gpus, n_stations=1) == ("GPU-a", "GPU-b")


# The launch's hang evidence (SYS_PTRACE for py-spy, the flight recorder's env)
def test_ptrace_and_flight_recorder_are_on_by_default_and_the_preview_says_so():
    from console.remote import cmdlines as rc

    c = cfg()
    argv = engines.build_launch(c, c.head, RT_VLLM).argv
    assert argv[argv.index("--cap-add") + 1] == "SYS_PTRACE"
    env = [argv[i + 1] for i, a in enumerate(argv) if a == "-e"]
    assert "TORCH_NCCL_TRACE_BUFFER_SIZE=2000" in env and "TORCH_NCCL_DUMP_ON_TIMEOUT=1" in env
    assert f"TORCH_NCCL_DEBUG_INFO_PIPE_FILE={rc.FLIGHT_RECORDER_PIPE}" in env
    assert f"TORCH_FR_DUMP_TEMP_FILE={rc.FLIGHT_RECORDER_DUMP}" in env
    note = engines.hang_evidence_note(c)
    assert "SYS_PTRACE for py-spy" in note and "last 2,000 collectives" in note


def test_the_flight_recorder_hints_name_what_the_launch_sets():
    """One pipe path: the launch's env and the hints shown when the recorder is off (the hang
    evidence, the next step) carry the same settings, so a hand launch that follows the hint is read."""
    from console.doctor.evidence import FR_HINT
    from console.doctor.next_steps import TABLE
    from console.remote import cmdlines as rc

    c = cfg()
    argv = engines.build_launch(c, c.head, RT_VLLM).argv
    env = dict(argv[i + 1].split("=", 1) for i, a in enumerate(argv) if a == "-e" and "=" in argv[i + 1])
    assert env["TORCH_NCCL_DEBUG_INFO_PIPE_FILE"] == rc.FLIGHT_RECORDER_PIPE
    assert rc.FLIGHT_RECORDER_ON.items() <= env.items()  # every setting the hint names, as launched
    for hint in (FR_HINT, TABLE["fr-off"].text):
        assert f"TORCH_NCCL_DEBUG_INFO_PIPE_FILE={rc.FLIGHT_RECORDER_PIPE} " in hint
        assert f"TORCH_NCCL_TRACE_BUFFER_SIZE={env['TORCH_NCCL_TRACE_BUFFER_SIZE']} " in hint
    assert TABLE["fr-off"].setting == f"TORCH_NCCL_TRACE_BUFFER_SIZE={env['TORCH_NCCL_TRACE_BUFFER_SIZE']}"


def test_an_operator_turns_ptrace_and_the_flight_recorder_off():
    c = cfg(VLLM, "[overrides]\ncap_ptrace = false\nflight_recorder = 0\n")
    argv = engines.build_launch(c, c.head, RT_VLLM).argv
    assert "--cap-add" not in argv and not any(a.startswith("TORCH_") for a in argv)
    assert engines.hang_evidence_note(c) == ""
    c = cfg(VLLM, '[overrides]\nflight_recorder = 500\nextra_env = { TORCH_NCCL_DUMP_ON_TIMEOUT = "0" }\n')
    argv = engines.build_launch(c, c.head, RT_VLLM).argv
    assert "TORCH_NCCL_TRACE_BUFFER_SIZE=500" in argv
    assert "TORCH_NCCL_DUMP_ON_TIMEOUT=0" in argv and "TORCH_NCCL_DUMP_ON_TIMEOUT=1" not in argv  # extra_env wins


@pytest.mark.parametrize("override,words", [
    ('cap_ptrace = "no"', "cap_ptrace: must be true or false"),
    ("flight_recorder = -1", "flight_recorder: must be an integer 0..1000000"),
    ("flight_recorder = true", "flight_recorder: must be an integer"),
])
def test_bad_evidence_settings_are_refused_at_load(override, words):
    from console.config import ConfigError

    with pytest.raises(ConfigError) as ei:
        cfg(VLLM, f"[overrides]\n{override}\n")
    assert words in str(ei.value)
