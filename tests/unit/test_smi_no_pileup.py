"""A one-shot nvidia-smi stuck in the driver survives even SIGKILL (state D): asking again must not
leave one more each time. Run for real with stand-ins on PATH: a ``timeout`` whose KILL does not end
the tool (as with a process in state D) and an ``nvidia-smi`` that never answers; the second query
is not started while the first is stuck, and exits as a killed one does (137: "not answering")."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from console.remote.cmdlines.bounds import KILLED_STATUS
from console.remote.cmdlines.gpus import gpu_query

pytestmark = pytest.mark.skipif(shutil.which("flock") is None, reason="no flock(1) here")


def _stand_ins(tmp_path: Path) -> dict[str, str]:
    tools = {"timeout": '#!/bin/bash\nshift 3\nexec "$@"\n',  # KILL ends nothing: the tool is in state D
             "nvidia-smi": f"#!/bin/bash\necho started >> {tmp_path}/starts\nexec sleep 60\n"}
    for name, text in tools.items():
        p = tmp_path / "bin" / name
        p.parent.mkdir(exist_ok=True)
        p.write_text(text)
        p.chmod(p.stat().st_mode | stat.S_IEXEC)
    return dict(os.environ, PATH=f"{tmp_path}/bin:{os.environ['PATH']}", XDG_RUNTIME_DIR=str(tmp_path))


def test_a_stuck_query_is_not_joined_by_another(tmp_path):
    env = _stand_ins(tmp_path)
    stuck = subprocess.Popen(["bash", "-c", gpu_query(limit_s=1)], env=env, start_new_session=True,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(200):  # the first one holds the lock once it started
            if (tmp_path / "starts").exists():
                break
            subprocess.run(["sleep", "0.05"], check=True)
        again = subprocess.run(["bash", "-c", gpu_query(limit_s=1)], env=env, capture_output=True, timeout=30)
        assert again.returncode == KILLED_STATUS and not again.stdout
        assert (tmp_path / "starts").read_text().count("started") == 1  # no second nvidia-smi
    finally:
        os.killpg(stuck.pid, 9)
        stuck.wait()
    done = subprocess.run(["bash", "-c", gpu_query(limit_s=1)], env=dict(env, PATH=os.environ["PATH"]),
                          capture_output=True, timeout=30)  # the lock is free again once it is gone
    assert done.returncode != KILLED_STATUS or b"not found" in done.stderr
