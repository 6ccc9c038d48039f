"""``dgx-console launch|stop|restart`` as an operator runs them: a real process against the
simulated stations (served by this test's event loop), exit codes, JSON on stdout, progress on
stderr, Ctrl+C."""

from __future__ import annotations

import asyncio
import json
import signal
import sys
import tomllib

import tomli_w

from console.sim.engine import container_status


async def cli(*args: str, stdin: bytes | None = None, interrupt_on: str | None = None) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "console", *args, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE)
    assert proc.stdin and proc.stdout and proc.stderr
    if stdin is not None:
        proc.stdin.write(stdin)
    proc.stdin.close()
    err_lines: list[str] = []
    async for raw in proc.stderr:
        line = raw.decode()
        err_lines.append(line)
        if interrupt_on and interrupt_on in line:
            proc.send_signal(signal.SIGINT)
            interrupt_on = None
    out = await proc.stdout.read()
    rc = await asyncio.wait_for(proc.wait(), 120)
    return rc, out.decode(), "".join(err_lines)


def config_path(sim) -> str:
    """The sim's config with timeouts for a loaded CI machine (the fixture's 3 s connect is tight)."""
    data = tomllib.loads(sim.config_path.read_text())
    data.update(connect_timeout_s=20.0, command_timeout_s=60.0)
    path = sim.config_path.with_name("cli-" + sim.config_path.name)
    path.write_text(tomli_w.dumps(data))
    return str(path)


def states(sim) -> dict[str, str]:
    return {n: container_status(sim.world, n, sim.world.state(n), "glm53")["state"] for n in sim.world.names}


async def test_launch_json_then_idempotent_then_stop(sim_factory):
    sim = await sim_factory(n=2, time_scale=0.01)
    cfg = config_path(sim)
    rc, out, err = await cli("launch", "--config", cfg, "--yes", "--json", "--skip-checks")
    assert rc == 0, err
    doc = json.loads(out)
    assert doc["result"] == "ok" and doc["transport"] == "gdrdma"
    assert [(s["station"], s["action"]) for s in doc["steps"] if s["action"] in ("run", "ready")] == [
        ("B", "run"), ("A", "run"), ("A", "ready")]
    assert "B  run: ok" in err and "launch: OK" in err  # progress on stderr; --json: the verdict there too
    assert [e["event"] for e in doc["timeline"]["A"]][0] == "container-started"
    assert doc["timeline"]["A"][-1]["event"] == "first-token"
    # over a running, healthy service: said in words, nothing changed without --replace
    rc, out, err = await cli("launch", "--config", cfg, "--yes")
    assert rc == 1 and "a healthy service is running on A and B; launch replaces it" in out
    assert "--replace" in out
    rc, out, err = await cli("launch", "--config", cfg, "--yes", "--skip-checks", "--replace")
    assert rc == 0 and out.startswith("launch: OK: serving glm-5.3")  # --yes: the verdict on stdout
    assert "A  stop: ok" in err and "verify-stop: ok" in err and "(last time" in out
    rc, out, err = await cli("stop", "--config", cfg, "--yes", "--json")
    assert rc == 0 and json.loads(out)["result"] == "ok"
    assert {n: v["clean"] for n, v in json.loads(out)["verified"].items()} == {"A": True, "B": True}
    assert states(sim) == {"A": "exited", "B": "exited"}


async def test_usage_errors_exit_2_with_one_line(sim_factory):
    sim = await sim_factory(n=2, time_scale=0.01)
    cfg = config_path(sim)
    rc, out, err = await cli("--read-only", "stop", "--config", cfg, "--yes")
    assert rc == 2 and err.strip().count("\n") == 0 and "read-only" in err
    rc, out, err = await cli("stop", "--config", cfg)  # stdin is a pipe: no one to confirm
    assert rc == 2 and "without --yes" in err
    rc, out, err = await cli("launch", "--config", cfg, "--yes", "--timeout", "-3")
    assert rc == 2 and "--timeout" in err
    assert sim.server.sessions == 0


async def test_dry_run_prints_the_plan_and_changes_nothing(sim_factory):
    sim = await sim_factory(n=3, time_scale=0.01)
    rc, out, err = await cli("launch", "--config", config_path(sim), "--dry-run", "--json")
    assert rc == 0, err
    plan = json.loads(out)["plan"]
    assert [(p["station"], p["command"].split()[1]) for p in plan] == [
        ("B", "rm"), ("B", "run"), ("C", "rm"), ("C", "run"), ("A", "rm"), ("A", "run")]
    assert all(s != "running" for s in states(sim).values())


async def test_ctrl_c_mid_load_cancels_and_stops_what_started(sim_factory):
    sim = await sim_factory(n=2, time_scale=0.03)
    rc, out, err = await cli("launch", "--config", config_path(sim), "--yes", "--json", "--skip-checks",
                             interrupt_on="A | Loading safetensors")
    assert rc == 1
    doc = json.loads(out)
    assert doc["result"] == "cancelled"
    assert "launch: CANCELLED" in err and "nothing left running" in err
    assert states(sim) == {"A": "exited", "B": "exited"}


async def test_fatal_line_with_keep_on_failure(sim_factory):
    sim = await sim_factory(n=2, time_scale=0.01, faults=["kv-too-small"])
    rc, out, err = await cli("launch", "--config", config_path(sim), "--yes", "--json", "--skip-checks",
                             "--keep-on-failure", "--skip-fit")
    assert rc == 1
    assert json.loads(out)["result"] == "failed"
    assert "kv-cache-too-small" in err and "larger than the available KV cache memory" in err
    assert states(sim)["B"] == "running"


async def test_plan_exit_codes_and_json(sim_factory):
    ok = await sim_factory(n=2, time_scale=0.01)
    rc, out, err = await cli("plan", "--config", config_path(ok), "--json")
    assert rc == 0, err
    doc = json.loads(out)
    assert set(doc) == {"stations", "fits", "warnings"} and doc["fits"] is True
    assert set(doc["stations"]) == {"A", "B"} and doc["stations"]["A"]["kv_tokens"] > 98304
    bad = await sim_factory(n=2, time_scale=0.01, faults=["kv-too-small"])
    rc, out, err = await cli("plan", "--config", config_path(bad))
    assert rc == 1 and "DOES NOT FIT" in out and "fits: no" in out
    assert "--max-model-len 1,048,576" in out and "lower --max-model-len to about" in out
    rc, out, err = await cli("plan", "--config", "/nonexistent/x.toml")
    assert rc == 2


async def test_stop_that_leaves_the_container_running_exits_1_with_the_fix(sim_factory):
    sim = await sim_factory(n=2, time_scale=0.005, faults=["container-survives-stop@B"])
    cfg = config_path(sim)
    rc, out, err = await cli("launch", "--config", cfg, "--yes", "--skip-checks")
    assert rc == 0, out + err
    rc, out, err = await cli("stop", "--config", cfg, "--yes", "--json", "--verify-timeout", "1")
    assert rc == 1
    doc = json.loads(out)
    assert doc["result"] == "failed" and doc["verified"]["A"]["clean"] is True
    b = doc["verified"]["B"]
    assert b["clean"] is False and b["container"] == "running"
    assert [f["id"] for f in b["findings"]][0] == "stop-container-running"
    assert "restart docker" in b["findings"][0]["fix"]
    assert "B stop verified: B: glm53 is still running after docker stop" in err
