"""The check catalogue's pure parts: labels per scope, JSON contract, exit code, redaction."""

from __future__ import annotations

import json

from console.config import parse_config
from console.secrets import redact_env_lines
from console.station.checks import (
    CHECK_IDS,
    CheckResult,
    _jobs,
    overall,
    station_summary,
    summary_line,
    to_json,
)
from tests.two_stations import stations_toml

CFG = """
profile = "glm53-nvfp4-2x-gb300-vllm"
""" + stations_toml("a.example", "b.example")

REQUIRED_IDS = {"link-down", "link-speed", "mtu-mismatch", "jumbo-ping", "clock-skew", "rdma-port-down",
                "ssh-a-to-b", "env-mismatch", "image-mismatch", "checkpoint-mismatch", "disk-space", "api-exposed"}


def test_catalogue_covers_the_findings_ids():
    assert REQUIRED_IDS <= set(CHECK_IDS)
    assert len(CHECK_IDS) == len(set(CHECK_IDS))


def test_jobs_label_each_scope():
    cfg = parse_config(CFG)
    labels = {(spec.id, label) for spec, _args, label, _needs in _jobs(cfg, None)}
    assert ("link-down", "A") in labels and ("link-down", "B") in labels
    assert ("jumbo-ping", "A->B") in labels and ("jumbo-ping", "B->A") in labels
    assert ("ssh-a-to-b", "A->B") in labels and ("ssh-a-to-b", "B->A") not in labels
    assert ("mtu-mismatch", "A<->B") in labels and ("image-mismatch", "A,B") in labels
    assert ("api-exposed", "A") in labels and ("api-exposed", "B") not in labels
    only = {(s.id, label) for s, _a, label, _n in _jobs(cfg, {"jumbo-ping@B->A", "link-speed"})}
    assert only == {("jumbo-ping", "B->A"), ("link-speed", "A"), ("link-speed", "B")}


def test_json_shape_and_exit_code():
    rs = [CheckResult("link-down", "A", "pass", "ok"), CheckResult("jumbo-ping", "A->B", "warn", "slow")]
    data = json.loads(to_json(rs))
    assert data == {"checks": [
        {"id": "link-down", "station": "A", "status": "pass", "summary": "ok", "evidence": "", "fix": ""},
        {"id": "jumbo-ping", "station": "A->B", "status": "warn", "summary": "slow", "evidence": "", "fix": ""}]}
    assert overall(rs) == 0
    assert overall(rs + [CheckResult("mtu-mismatch", "A<->B", "fail", "x")]) == 1
    assert overall([CheckResult("link-down", "B", "skip", "unreachable")]) == 0


def test_station_summary_counts_checks_that_involve_it():
    rs = [CheckResult("link-down", "A", "pass", ""), CheckResult("jumbo-ping", "A->B", "fail", ""),
          CheckResult("image-mismatch", "A,B", "pass", ""), CheckResult("link-down", "B", "skip", "")]
    assert station_summary(rs, "A") == {"pass": 2, "fail": 1, "warn": 0, "skip": 0}
    assert station_summary(rs, "B") == {"pass": 1, "fail": 1, "warn": 0, "skip": 1}
    assert summary_line(station_summary(rs, "B")) == "checks: 1 FAIL, 1 skip, 1 pass"
    assert summary_line({}) == "checks: not run"


def test_env_evidence_is_redacted():
    text = 'export RANK="0"\nexport HF_TOKEN="hf_abc"\nAPI_KEY=sk-1\nNCCL_IB_HCA=mlx5_0\n'
    out = redact_env_lines(text)
    assert "hf_abc" not in out and "sk-1" not in out
    assert 'export RANK="0"' in out and "NCCL_IB_HCA=mlx5_0" in out and "HF_TOKEN=<redacted>" in out


def test_cli_usage_and_config_errors_exit_2(tmp_path, capsys):
    from console.cli import main

    assert main(["check", "--only", "no-such-check", "--config", str(tmp_path / "x.toml")]) == 2
    assert "unknown check 'no-such-check'" in capsys.readouterr().err
    assert main(["check", "--config", str(tmp_path / "missing.toml")]) == 2
    err = capsys.readouterr().err
    assert "file not found" in err and "Traceback" not in err
    one = tmp_path / "one.toml"
    one.write_text('[[stations]]\nname = "A"\nhost = "a"\nrank = 0\n')
    assert main(["validate-rdma", "--config", str(one)]) == 2
    assert "at least two stations" in capsys.readouterr().err
    two = tmp_path / "two.toml"
    two.write_text('[[stations]]\nname = "A"\nhost = "a"\nrank = 0\n[[stations]]\nname = "B"\nhost = "b"\nrank = 1\n')
    assert main(["check", "--only", "link-down@NOSUCH", "--config", str(two)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no station 'NOSUCH'" in err and "A, B" in err
    assert main(["check", "--only", "jumbo-ping@B", "--config", str(two)]) == 2  # its labels are A->B, B->A
    assert "A->B, B->A" in capsys.readouterr().err


async def test_api_exposed_reads_the_launch_settings(monkeypatch):
    from console.station.checks.context import CheckRun
    from console.station.checks.software import check_api_exposed

    open_cfg = parse_config(CFG)
    r = await check_api_exposed(CheckRun(open_cfg, {}, 1.0), open_cfg.head)
    assert r.status == "warn" and "0.0.0.0:8000" in r.summary and "--host 0.0.0.0" in r.evidence
    keyed = parse_config(CFG.replace('profile = "glm53-nvfp4-2x-gb300-vllm"',
                                     'profile = "glm53-nvfp4-2x-gb300-vllm"\n[api]\napi_key_env = "DGX_TEST_KEY"'))
    monkeypatch.setenv("DGX_TEST_KEY", "sk-secret-value")
    r2 = await check_api_exposed(CheckRun(keyed, {}, 1.0), keyed.head)
    assert r2.status == "pass" and "with an API key" in r2.summary and "sk-secret-value" not in r2.evidence
    monkeypatch.delenv("DGX_TEST_KEY")
    r3 = await check_api_exposed(CheckRun(keyed, {}, 1.0), keyed.head)
    assert r3.status == "warn" and "configured but empty" in r3.evidence


async def test_checks_without_rail_settings_skip_with_the_config_fix():
    from console.station.checks import run_checks

    bare = parse_config(CFG.replace('rail_netdev = "enp1s0f1np1"\n', "", 1))
    results = await run_checks(bare, transports={}, only=["link-down@A", "jumbo-ping@A->B"])
    assert [(r.status, r.summary) for r in results] == [("skip", "not configured: A.rail_netdev"),
                                                        ("skip", "not configured: A.rail_netdev")]
    assert "rail_netdev" in results[0].fix


def test_an_rdma_run_counts_on_both_panes():
    """After one run the panes' counts disagreed: an RDMA run's label ("A->B mlx5_0 host")
    counted on A only."""
    from console.station.rdma import RdmaRun
    from console.ui.screens.checks import rdma_as_check

    rs = [rdma_as_check(RdmaRun("mlx5_0", m, s, c, status="pass")) for c, s in (("A", "B"), ("B", "A"))
          for m in ("host", "gpu")]
    assert station_summary(rs, "A") == station_summary(rs, "B") == {"pass": 4, "fail": 0, "warn": 0, "skip": 0}
