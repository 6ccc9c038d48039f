"""The field corpus (bench/field: public excerpts of every stack, split by source into tune and held-out parts),
the wordings table, and the context the log gives (hosts, ranks per host, stack, phase).

The tune part is what the catalogue was tuned on: every excerpt there must come out right. The held-out part
is only scored (bench/diagnose_field.py), except its healthy excerpts, which must stay clean like every
healthy log. Lines in the unit tests below are quoted from the corpus files named beside them.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from log_excerpts import diagnose, expected, headlines

from console import catalogue as cat
from console.catalogue.wordings import STACK_FIXES, WORDINGS, compiled
from console.diagnosis import SPECS, diagnose_lines, has_problems

ROOT = Path(__file__).resolve().parents[2]
FIELD = ROOT / "bench" / "field"
sys.path.insert(0, str(ROOT / "bench"))
from diagnose_field import part_of  # noqa: E402  (the bench's own split, so the test and the bench agree)

FILES = sorted(FIELD.glob("*.log"))
TUNE = [p for p in FILES if part_of(p) == "tune"]
HEALTHY = [p for p in FILES if expected(p).startswith("healthy")]


def test_corpus_has_sixty_sourced_excerpts_split_in_two_with_healthy_logs_of_every_stack():
    assert len(FILES) >= 60
    for p in FILES:
        first = p.read_text(encoding="utf-8").splitlines()[0]
        assert re.match(r"# source: https://github\.com/[\w.\-]+/[\w.\-]+/(?:issues|pull)/\d+$", first), p.name
    held = [p for p in FILES if part_of(p) == "heldout"]
    assert len(TUNE) >= 25 and len(held) >= 25
    stacks = {expected(p).split("-", 1)[1] for p in HEALTHY}
    assert {"vllm", "sglang", "trtllm", "llamacpp", "ray", "pytorch", "nccl", "kernel", "container"} <= stacks


def test_the_fresh_set_is_sourced_labelled_and_shares_no_report_with_what_the_catalogue_was_tuned_on():
    """bench/field_fresh is only scored (never tuned on): its worth is that none of its reports was seen before."""
    fresh = sorted((ROOT / "bench" / "field_fresh").glob("*.log"))
    assert len(fresh) >= 20
    def source(p: Path) -> str:
        return p.read_text(encoding="utf-8").splitlines()[0]
    seen = {source(p) for d in (FIELD, ROOT / "bench" / "heldout", ROOT / "tests" / "fixtures" / "logs")
            for p in d.glob("*.log")}
    kinds = {expected(p) for p in fresh}
    for p in fresh:
        assert re.match(r"# source: https://github\.com/[\w.\-]+/[\w.\-]+/(?:issues|pull)/\d+$", source(p)), p.name
        assert source(p) not in seen, p.name
        assert expected(p) in SPECS or expected(p) == "outside" or expected(p).startswith("healthy-"), p.name
        if expected(p) == "outside":
            assert headlines(p), p.name
    assert len({source(p) for p in fresh}) == len(fresh)
    assert "outside" in kinds and any(k.startswith("healthy-") for k in kinds)


@pytest.mark.parametrize("path", [p for p in TUNE if not expected(p).startswith(("healthy", "outside"))],
                         ids=lambda p: p.name)
def test_tune_excerpt_names_its_kind_first(path: Path):
    findings = diagnose(path)
    assert findings and findings[0].id == expected(path), [(f.id, f.severity) for f in findings]
    assert findings[0].severity == "error"


@pytest.mark.parametrize("path", [p for p in FILES if expected(p) == "outside"], ids=lambda p: p.name)
def test_outside_failure_is_never_silent(path: Path):
    findings = diagnose(path)
    assert findings, "silent"
    if path in TUNE:  # the headline quotes the line naming the error, not a wrapper
        top = findings[0]
        assert top.id == "unrecognised-error"
        assert any(h in top.cause for h in headlines(path)), top.cause


@pytest.mark.parametrize("path", HEALTHY, ids=lambda p: p.name)
def test_healthy_excerpt_of_either_part_raises_no_error_or_warning(path: Path):
    findings = diagnose(path)
    assert not has_problems(findings), [(f.id, f.severity, f.evidence[0].text) for f in findings]


# ------------------------------------------------------------------ the wordings table

def test_every_wording_row_names_a_kind_and_is_a_signature_reached_by_its_anchor():
    for w, pat in compiled():
        assert w.kind in SPECS, w
        sigs = cat.ANCHORS[w.anchor]
        # the same regex (by its text: ``compiled()`` compiles again, and re's cache may have let it go)
        assert any(s.id == w.kind and getattr(s.pattern, "pattern", None) == getattr(pat, "pattern", None)
                   for s in sigs), w
    assert {k for k, _stack in STACK_FIXES} <= set(SPECS)
    assert len({(w.kind, w.anchor, w.pattern) for w in WORDINGS}) == len(WORDINGS), "one row per wording"


@pytest.mark.parametrize(("line", "kind"), [
    # cuda-oom__optimum-nvidia-146.log
    ("[08/11/2024-06:10:36] [TRT] [E] [virtualMemoryBuffer.cpp::resizePhysical::151] Error Code 2: OutOfMemory "
     "(Requested size was 16654532608 bytes.)", "cuda-oom"),
    # cuda-oom__tensorrt-llm-5950.log
    ("RuntimeError: Executor creation failed due to insufficient GPU memory.", "cuda-oom"),
    # gpu-unavailable__libnvidia-container-3.log
    ("nvidia-container-cli: initialization error: cuda error: unknown error", "gpu-unavailable"),
    # port-in-use__sakura-launcher-71.log
    ("main: couldn't bind HTTP server socket, hostname: 127.0.0.1, port: 8080", "port-in-use"),
    # shm-too-small__mmdetection-1997.log
    ("RuntimeError: DataLoader worker (pid 37) is killed by signal: Bus error. It is possible that dataloader's "
     "workers are out of shared memory. Please try to raise your shared memory limit.", "shm-too-small"),
    # worker-died__colossalai-3514.log
    ("ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: -9) local_rank: 3 (pid: 812917) of "
     "binary: /data/chenhao/anaconda3/envs/ColossalAI-Chat/bin/python", "worker-died"),
])
def test_another_stacks_wording_names_the_known_kind(line: str, kind: str):
    findings = diagnose_lines("a", [line])
    assert findings[0].id == kind and findings[0].severity == "error"


def test_an_allocation_llama_cpp_retries_and_survives_is_no_finding_and_one_it_does_not_is():
    lines = [  # healthy-llamacpp__llama.cpp-pr-26297.log
        "1.06.520.077 E ggml_backend_cuda_buffer_type_alloc_buffer: allocating 51748.72 MiB on device 1: cudaMalloc "
        "failed: out of memory",
        "1.06.520.107 W sched_reserve: compute buffer allocation failed, retrying without pipeline parallelism",
        "1.07.304.130 I srv    load_model: initializing, n_slots = 1, n_ctx_slot = 50176, kv_unified = 'false'",
    ]
    assert not has_problems(diagnose_lines("a", lines))
    assert diagnose_lines("a", lines[:2])[0].id == "cuda-oom"


def test_an_error_line_that_retries_is_cleared_by_a_later_line_saying_the_run_went_on():
    retry = "ERROR 01-01 00:00:00 [client.py:88] Connection reset by peer, retrying in 5 s"
    assert not has_problems(diagnose_lines("a", [retry, "INFO:     Uvicorn running on http://0.0.0.0:8000"]))
    assert diagnose_lines("a", [retry, "INFO:     Waiting for application startup."])[0].id == "unrecognised-error"


# ------------------------------------------------------------------ context read from the log

NCCL_TESTS_HEAD = [  # healthy-nccl__nccl-1812-single-node.log
    "#  Rank  0 Group  0 Pid 749452 on paraai-n32-h-01-agent-18 device  0 [0000:01:00] NVIDIA A100-PCIE-40GB",
    "#  Rank  1 Group  0 Pid 749452 on paraai-n32-h-01-agent-18 device  1 [0000:02:00] NVIDIA A100-PCIE-40GB",
]
VERBS = "paraai-n32-h-01-agent-18:749452:749484 [3] NCCL INFO Failed to open libibverbs.so[.1]"


def test_no_verbs_on_a_run_the_log_shows_on_one_host_is_no_finding_but_across_hosts_it_is():
    assert not diagnose_lines("a", [*NCCL_TESTS_HEAD, VERBS])
    two_hosts = [NCCL_TESTS_HEAD[0], NCCL_TESTS_HEAD[1].replace("on paraai-n32-h-01-agent-18", "on agent-19")]
    assert [(f.id, f.severity) for f in diagnose_lines("a", [*two_hosts, VERBS])] == [("nccl-ib-missing", "error")]


def test_ranks_per_host_from_ncclss_summary_decide_whether_the_run_crosses_hosts():
    one = "h:1:1 [0] NCCL INFO comm 0x5 rank 0 nRanks 8 nNodes 1 localRanks 8 localRank 0 MNNVL 0"
    two = "h:1:1 [0] NCCL INFO comm 0x5 rank 0 nRanks 16 nNodes 2 localRanks 8 localRank 0 MNNVL 0"
    verbs = "h:1:1 [0] NCCL INFO Failed to open libibverbs.so[.1]"
    assert not diagnose_lines("a", [one, verbs])
    assert diagnose_lines("a", [two, verbs])[0].id == "nccl-ib-missing"


def test_the_out_of_memory_fix_names_the_knobs_of_the_stack_the_log_shows():
    oom = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB."
    sglang = ["[2025-10-16 09:06:09 TP0] Init torch distributed ends. mem usage=1.96 GB",
              "[2025-10-16 09:06:10 TP0] Load weight begin. avail mem=137.34 GB",
              "[2025-10-16 09:06:30 TP0] Load weight end. type=X, dtype=torch.bfloat16, avail mem=1.0 GB", oom]
    assert "--mem-fraction-static" in diagnose_lines("a", sglang)[0].remedy
    vllm = ["(EngineCore_DP0 pid=7) INFO 11-30 14:05:00 [core.py:77] Initializing a V1 LLM engine (v0.11.0) with "
            "config: model='m'", oom]
    assert "--gpu-memory-utilization" in diagnose_lines("a", vllm)[0].remedy


def test_an_oom_while_llama_cpp_loads_tensors_is_one_of_weights_that_do_not_fit():
    lines = ["load_tensors: loading model tensors, this can take a while... (mmap = true, direct_io = false)",
             "ggml_backend_cuda_buffer_type_alloc_buffer: allocating 144817.04 MiB on device 0: cudaMalloc failed: "
             "out of memory"]  # cuda-oom__llama.cpp-20431.log
    top = diagnose_lines("a", lines)[0]
    assert top.id == "cuda-oom" and "loading the weights" in top.cause


@pytest.mark.parametrize(("lines", "quote"), [
    # a launcher's warning that ends the run (outside__pytorch-150916.log)
    (["W0409 07:28:49.530000 1359 torch/distributed/elastic/agent/server/api.py:719] Received 15 death signal, "
      "shutting down workers"], "Received 15 death signal"),
    # C++ exceptions: the what() line names the error, "terminate called" is the wrapper (outside__tensorrt-llm-1826)
    (["terminate called after throwing an instance of 'tensorrt_llm::common::TllmException'",
      "  what():  [TensorRT-LLM][ERROR] Assertion failed: Failed: MPI error /x/mpiUtils.cpp:211 '6'"],
     "Assertion failed: Failed: MPI error"),
    # nccl-tests' failure line carries no error level (outside__nccl-tests-280.log)
    (["c2211f46f318: Test NCCL failure common.cu:1005 'unhandled CUDA error'",
      ".. c2211f46f318 pid 3288: Test failure common.cu:891"], "Test NCCL failure common.cu:1005"),
])
def test_a_line_that_ends_the_run_is_never_silent_and_is_the_headline(lines: list[str], quote: str):
    top = diagnose_lines("a", lines)[0]
    assert top.id == "unrecognised-error" and quote in top.cause, top.cause


def test_docker_runs_own_refusal_is_named_by_its_innermost_cause_and_docker_logs_of_a_gone_container_is_not():
    # `docker run` refusing to start the container ends the run: never silent, headlined by the hook's stderr
    line = ("docker: Error response from daemon: OCI runtime create failed: container_linux.go:380: starting "
            "container process caused: error running hook: exit status 1, stdout: , stderr: nvidia-container-cli: "
            "mount error: file creation failed: /merged/usr/lib/libnvidia-ml.so.1: file exists: unknown.")
    found = diagnose_lines("A", [line])
    assert found and found[0].id == "unrecognised-error", [(f.id, f.cause) for f in found]
    assert "nvidia-container-cli: mount error: file creation failed" in found[0].cause
    assert "OCI runtime" not in found[0].cause  # the wrapper is not the headline
    # the same daemon words from `docker logs` of a container that is gone are not a run's end
    assert not has_problems(diagnose_lines("A", ["Error response from daemon: No such container: glm53"]))
