"""Secrets by name only, end to end on the simulated stations: a launch with an API key, an HF token
and a ``secret_env`` name in ``[overrides.extra_env]``. Every command line the stations ran (as their
SSH server saw them) and every argv docker got is free of the values; the values still reached the
container (docker's shim records what ``-e NAME`` found in its environment, as sha256); the preview
and ``launch --dry-run`` (text and JSON) show ``***``."""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json

from console.cli import main
from console.config import ApiSettings, parse_config
from console.service.actions import ActionOptions, ServiceActions, run_action

SECRETS = {"HF_TOKEN": "hf_simtokenabcdef123456", "ODD_NAME": "odd-sim-value-42"}
API_KEY = "sk-sim-secret-key-9"


def with_secrets(sim, monkeypatch):
    monkeypatch.setenv("DGX_SIM_SECRET_KEY", API_KEY)
    text = sim.config_path.read_text()
    text = text.replace("[api]", '[api]\napi_key_env = "DGX_SIM_SECRET_KEY"', 1)
    text += ('\n[overrides]\nsecret_env = ["ODD_NAME"]\n\n[overrides.extra_env]\n'
             + "".join(f'{k} = "{v}"\n' for k, v in SECRETS.items()) + 'PLAIN_SETTING = "visible-1"\n')
    sim.config_path.write_text(text)
    return parse_config(text, str(sim.config_path))


def no_secret_in(text: str) -> bool:
    return not any(v in text for v in (*SECRETS.values(), API_KEY))


async def test_launch_sends_secrets_by_name_only(sim_factory, monkeypatch):
    sim = await sim_factory(n=2, time_scale=0.01)
    cfg = with_secrets(sim, monkeypatch)
    events: list = []
    async with ServiceActions(cfg, ready_timeout_s=60, on_event=events.append) as svc:  # plan and run on one session
        specs = await svc.plan_launch()
        previews = [p.preview for p in svc.preview("launch", specs)]
        res = await svc.run("launch", ActionOptions(specs=specs, skip_checks=True))
    assert res.result == "ok", res.summary

    ran = [line for _station, line in sim.server.command_log]
    assert ran and all(no_secret_in(line) for line in ran)
    run_a = next(line for st, line in sim.server.command_log if st == "A" and "docker run" in line)
    assert "-e HF_TOKEN " in run_a and "-e ODD_NAME " in run_a and "-e VLLM_API_KEY " in run_a
    assert "PLAIN_SETTING=visible-1" in run_a
    for name in sim.world.names:
        state = (sim.world.station_dir(name) / "state.json").read_text()
        assert no_secret_in(state)  # docker's argv as the shim recorded it
        got = sim.world.state(name)["containers"]["glm53"]["env_from_client"]
        want = {k: hashlib.sha256(v.encode()).hexdigest() for k, v in SECRETS.items()}
        if name == "A":
            want["VLLM_API_KEY"] = hashlib.sha256(API_KEY.encode()).hexdigest()
        assert got == want, name  # the values did reach docker, through its environment
    assert all(no_secret_in(p) for p in previews) and any("HF_TOKEN=***" in p for p in previews)
    assert all(no_secret_in(e.text) for e in events)
    assert no_secret_in(json.dumps(res.to_json()))


async def test_dry_run_text_and_json_mask_the_secrets(sim_factory, monkeypatch, capsys):
    sim = await sim_factory(n=2, time_scale=0.01)
    with_secrets(sim, monkeypatch)

    def cli(*argv):
        try:
            return main(list(argv))
        except SystemExit as exc:
            return exc.code

    for extra in ([], ["--json"]):
        rc = await asyncio.to_thread(cli, "launch", "--dry-run", "--config", str(sim.config_path), *extra)
        cap = capsys.readouterr()
        assert rc == 0, cap.err
        assert no_secret_in(cap.out + cap.err)
        assert "HF_TOKEN=***" in cap.out and "ODD_NAME=***" in cap.out
        if extra:
            assert json.loads(cap.out)["plan"]
    assert all(no_secret_in(line) for _s, line in sim.server.command_log)


async def test_the_api_key_alone_still_works_and_stays_out(sim_factory, monkeypatch):
    sim = await sim_factory(n=2, time_scale=0.01)
    monkeypatch.setenv("DGX_SIM_SECRET_KEY", API_KEY)
    cfg = dataclasses.replace(sim.config, api=ApiSettings(url=sim.config.api.url, api_key_env="DGX_SIM_SECRET_KEY"))
    res = await run_action(cfg, "launch", ActionOptions(skip_checks=True), ready_timeout_s=60)
    assert res.result == "ok", res.summary
    assert all(API_KEY not in line for _s, line in sim.server.command_log)


BY_VALUE = {"HTTPS_PROXY": "http://puser:proxy-pw-5521@proxy.example:3128", "DB_PASSWD": "db-passwd-7781"}
URL_PW = "url-pw-9931"


def no_value_in(text: str) -> bool:
    return not any(v in text for v in ("proxy-pw-5521", "db-passwd-7781", URL_PW))


async def test_secrets_by_value_stay_out_of_launch_status_and_every_command(sim_factory, capsys):
    """A password in api.url's userinfo, a proxy variable and a *PASSWD* value never show
    in the launch's progress, its result, ``status`` (text and JSON) or any command a station ran."""
    sim = await sim_factory(n=2, time_scale=0.01)
    text = sim.config_path.read_text().replace('url = "http://', f'url = "http://apiuser:{URL_PW}@', 1)
    text += "\n[overrides.extra_env]\n" + "".join(f'{k} = "{v}"\n' for k, v in BY_VALUE.items())
    sim.config_path.write_text(text)
    cfg = parse_config(text, str(sim.config_path))
    assert URL_PW in cfg.api_url()
    events: list = []
    res = await run_action(cfg, "launch", ActionOptions(skip_checks=True), ready_timeout_s=60, on_event=events.append)
    assert res.result == "ok", res.summary
    assert all(no_value_in(e.text) for e in events) and no_value_in(json.dumps(res.to_json()))
    assert "apiuser:***@" in res.summary
    ran = [line for _station, line in sim.server.command_log]
    assert ran and all(no_value_in(line) for line in ran)
    assert any("-e HTTPS_PROXY " in line for line in ran)

    def cli(*argv):
        try:
            return main(list(argv))
        except SystemExit as exc:
            return exc.code

    for extra in ([], ["--json"]):
        rc = await asyncio.to_thread(cli, "status", "--config", str(sim.config_path), *extra)
        cap = capsys.readouterr()
        assert rc == 0, cap.err
        assert no_value_in(cap.out + cap.err) and "apiuser:***@" in cap.out
