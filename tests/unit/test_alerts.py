"""Alerts out, against a real HTTP receiver on 127.0.0.1 (tests/receiver.py): the webhook's JSON and
ntfy's headers, one message per incident and its "resolved", folding and the hourly cap, retries on
5xx and none on 4xx, a receiver that never answers (bounded, the caller never waits), the token in a
sink URL masked in everything said and printed, the recorder's incidents alerting once across two
consoles, and ``alert-test``'s lines and exit codes."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from console.cli import main
from console.config import parse_config, secret_values
from console.incidents.alerts import Alerter
from console.incidents.recorder import IncidentRecorder
from console.incidents.sinks import WEBHOOK_KEYS
from console.incidents.store import Ledger
from console.secrets import mask_sink_url
from console.station.progress import judgement
from console.station.state import Stations
from console.station.verdict import Verdict
from console.vocabulary import Progress
from tests.receiver import HANG, Receiver
from tests.two_stations import stations_toml
from tests.waiting import until

TOKEN = "T0KEN-s3cr3t-abcdef"
STATIONS = stations_toml(rail=False)


def config(alerts: str, path: str = "alerts.toml"):
    return parse_config(STATIONS + "[alerts]\n" + alerts, path)


def hook(rx: Receiver) -> str:
    return f"{rx.base}/hooks/{TOKEN}"


class Said(list):
    def __call__(self, kind: str, text: str) -> None:
        self.append((kind, text))


def open_wedge(a: Alerter, incident: int = 7, now: float | None = None) -> bool:
    return a.opened("wedge", stations=("A", "B"), verdict="wedged: tokens frozen 41 s, 4 running",
                    next_step="read the bundle, then restart (R)", start=time.time() - 41, incident=incident,
                    bundle="/state/incidents/incident-7-wedge.tar.gz", now=now)


async def test_webhook_json_on_open_and_resolved():
    with Receiver() as rx:
        said = Said()
        a = Alerter(config(f'webhook = "{hook(rx)}"\n'), said, service="svc1")
        assert open_wedge(a)
        await a.drain(10)
        (got,) = rx.got
        assert got.path == f"/hooks/{TOKEN}" and got.headers["Content-Type"] == "application/json"
        body = got.json()
        assert tuple(body) == WEBHOOK_KEYS
        assert body["event"] == "open" and body["kind"] == "wedge" and body["incident"] == 7
        assert body["stations"] == ["A", "B"] and "tokens frozen" in body["verdict"]
        assert body["next_step"].startswith("read the bundle") and body["bundle"].endswith("incident-7-wedge.tar.gz")
        assert body["console_host"] and body["service"] == "svc1" and body["started_at"].endswith("Z")
        assert body["resolved_at"] is None and body["folded"] == 0
        assert a.resolved("wedge", incident=7, stations=("A", "B"), verdict="wedged", start=time.time() - 100,
                          end=time.time())
        await a.drain(10)
        done = rx.got[1].json()
        assert done["event"] == "resolved" and done["incident"] == 7 and done["resolved_at"].endswith("Z")
        assert 99 <= done["duration_s"] <= 101 and done["title"].startswith("resolved: wedge on A, B")
        assert [k for k, _ in said] == ["alert", "alert"] and "sent to webhook" in said[0][1]
        # an incident this console never alerted has no "resolved"
        assert not a.resolved("wedge", incident=99, stations=("A",), verdict="x", start=0, end=1)


async def test_ntfy_title_priority_tags_and_body():
    with Receiver() as rx:
        a = Alerter(config(f'ntfy = "{rx.base}/topic-{TOKEN}"\n'))
        assert open_wedge(a)
        assert a.opened("rail", stations=("B",), verdict="B rail enp1s0f1np1 down · since 02:55", next_step="cable",
                        start=time.time(), incident=8)
        await a.drain(10)
        by_title = {r.headers["Title"]: r for r in rx.got}
        wedge = next(r for t, r in by_title.items() if t.startswith("wedge on A, B"))
        assert wedge.headers["Priority"] == "5" and wedge.headers["Tags"].split(",") == ["rotating_light", "wedge", "open"]
        text = wedge.body.decode()
        assert "tokens frozen" in text and "next: read the bundle" in text and "incident 7" in text
        rail = next(r for t, r in by_title.items() if t.startswith("rail on B"))
        assert rail.headers["Priority"] == "4" and "warning" in rail.headers["Tags"]
        assert "·" in rail.body.decode("utf-8")


async def test_one_message_per_incident_folding_and_the_hourly_cap():
    with Receiver() as rx:
        said = Said()
        a = Alerter(config(f'webhook = "{hook(rx)}"\nrepeat_after_s = 300\nmax_per_hour = 3\n'), said)
        t = time.time()
        assert open_wedge(a, 1, now=t)
        assert not open_wedge(a, 1, now=t + 1)  # the same incident: never twice
        assert not open_wedge(a, 2, now=t + 60)  # a new wedge 60 s later: folded
        assert any("folded" in text for _, text in said)
        assert open_wedge(a, 3, now=t + 400)  # after repeat_after_s: sent, and says the one folded
        await a.drain(10)
        assert [r.json()["incident"] for r in rx.got] == [1, 3] and rx.got[1].json()["folded"] == 1  # in order
        assert "1 more alert held back" in rx.got[1].json()["text"]
        assert a.opened("rail", stations=("A",), verdict="down", next_step="", start=t, incident=4, now=t + 401)
        assert not a.opened("gpu-fault", stations=("A",), verdict="Xid 79", next_step="", start=t, incident=5,
                            now=t + 402)  # the fourth message within the hour
        assert any(k == "alert-failed" and "held back" in text for k, text in said)
        await a.drain(10)
        assert len(rx.got) == 3


async def test_kinds_switched_off_are_not_sent():
    with Receiver() as rx:
        a = Alerter(config(f'webhook = "{hook(rx)}"\nkinds = ["rail"]\n'))
        assert not open_wedge(a)
        assert a.alert("recovered", stations=("A", "B"), verdict="x") is False
        await a.drain(5)
        assert rx.got == []


async def test_retries_after_5xx_then_sent_and_none_after_4xx():
    with Receiver([503, 502, 200]) as rx:
        a = Alerter(config(f'webhook = "{hook(rx)}"\nretries = 3\n'), backoff_s=0.05)
        out = await a.send_all(a.test_alert())
        assert [o.status for o in out] == ["sent"] and out[0].attempts == 3 and len(rx.got) == 3
    with Receiver([400, 200]) as rx:
        a = Alerter(config(f'webhook = "{hook(rx)}"\nretries = 3\n'), backoff_s=0.05)
        (o,) = await a.send_all(a.test_alert())
        assert o.status == "failed" and o.attempts == 1 and o.detail == "HTTP 400" and len(rx.got) == 1
    with Receiver([500]) as rx:
        a = Alerter(config(f'webhook = "{hook(rx)}"\nretries = 2\n'), backoff_s=0.05)
        (o,) = await a.send_all(a.test_alert())
        assert o.status == "failed" and o.attempts == 3 and o.detail == "HTTP 500"


@pytest.mark.parametrize(("value", "wait"), [
    ("2", 2.0), (" 7 ", 7.0), ("0", 0.0), ("86400", 60.0),  # a day is capped: the delivery stays bounded
    ("Wed, 21 Oct 2037 07:28:00 GMT", 60.0), ("Thu, 01 Jan 1970 00:00:00 GMT", 0.0),  # far ahead / past
    (None, None), ("", None), ("-5", None), ("soon", None), ("1e9", None), ("9" * 40, None),
])
def test_retry_after_is_seconds_or_a_date_and_capped(value, wait):
    from console.incidents.sinks import retry_after_s

    assert retry_after_s(value) == wait


async def test_a_429_that_says_when_is_waited_for_before_the_next_try():
    with Receiver([(429, {"Retry-After": "1"}), 200]) as rx:
        a = Alerter(config(f'webhook = "{hook(rx)}"\nretries = 2\n'), backoff_s=0.01)  # the table: 0.01 s
        (o,) = await a.send_all(a.test_alert())
        assert o.status == "sent" and o.attempts == 2
        assert rx.got_at[1] - rx.got_at[0] >= 0.9  # the receiver's second, not the table's hundredth
    with Receiver([(429, {"Retry-After": "soon"}), 200]) as rx:  # no number: the table's wait (parsed above)
        a = Alerter(config(f'webhook = "{hook(rx)}"\nretries = 2\n'), backoff_s=0.01)
        (o,) = await a.send_all(a.test_alert())
        assert o.status == "sent" and o.attempts == 2


async def test_a_receiver_that_never_answers_is_bounded_and_never_blocks_the_caller():
    with Receiver([HANG]) as rx:
        said = Said()
        a = Alerter(config(f'webhook = "{hook(rx)}"\ntimeout_s = 0.5\nretries = 1\n'), said, backoff_s=0.1)
        t0 = time.monotonic()
        assert open_wedge(a)  # a plain call: the delivery is queued, the caller (the UI's loop) goes on
        assert rx.got == []  # nothing was sent inside the call: no request before the loop ran again
        ticks = 0

        async def loop_alive() -> None:
            nonlocal ticks
            while True:
                await asyncio.sleep(0.05)
                ticks += 1

        alive = asyncio.create_task(loop_alive())
        assert await a.drain(5)
        alive.cancel()
        spent = time.monotonic() - t0
        assert spent >= 1.0, spent  # two tries of 0.5 s were waited out (drain's 5 s is the bound)
        assert ticks >= 10  # the loop ran all along
        assert len(rx.got) == 2
        ((kind, text),) = said
        assert kind == "alert-failed" and "no answer within 0.5 s" in text and "after 2 tries" in text


async def test_the_token_in_a_sink_url_is_masked_everywhere():
    url = f"http://user:{TOKEN}@127.0.0.1:9/hooks/{TOKEN}"
    cfg = config(f'webhook = "{url}"\nntfy = "http://127.0.0.1:9/{TOKEN}?auth={TOKEN}"\nretries = 0\ntimeout_s = 1\n')
    assert TOKEN not in mask_sink_url(url) and mask_sink_url(url) == "http://***@127.0.0.1:9/***"
    assert url in secret_values(cfg)
    said = Said()
    a = Alerter(cfg, said)
    assert open_wedge(a)
    await a.drain(10)
    ((kind, text),) = said
    assert kind == "alert-failed" and "webhook http://***@127.0.0.1:9/***: failed" in text and TOKEN not in text
    out = a.outcomes[-1][1]
    assert all(TOKEN not in json.dumps(o.to_json()) for o in out)


async def test_the_recorder_alerts_an_incident_once_across_two_consoles_and_says_it_cleared(tmp_path):
    with Receiver() as rx:
        cfg = config(f'webhook = "{hook(rx)}"\n')
        ledger = Ledger(tmp_path / "ledger.sqlite3")
        news: list = []
        consoles = [IncidentRecorder(cfg, Stations.for_config(cfg), news.append, ledger=ledger, capture=False)
                    for _ in range(2)]
        jobs = [asyncio.create_task(r.run()) for r in consoles]
        now = time.time()
        wedged = {"A": Verdict(Progress.WEDGED, now - 40, "wedged: tokens frozen 40 s with 4 running", station="A"),
                  "B": Verdict(Progress.WEDGED, now - 40, "wedged", station="B")}
        for r in consoles:
            r.tick(judgement(wedged, r.stations.head_name, now), now)
        await until(lambda: len(rx.got) >= 1, what="the wedge's alert", timeout=10)
        for r in consoles:
            await r.drain()
        assert [x.json()["event"] for x in rx.got] == ["open"]
        (row,) = ledger.incidents()
        assert "alerted" in row.action and rx.got[0].json()["incident"] == row.id
        moving = {n: Verdict(Progress.PROGRESSING, now, "tokens moving", station=n) for n in "AB"}
        for r in consoles:
            r.tick(judgement(moving, r.stations.head_name, now + 60), now + 60)
        await until(lambda: len(rx.got) >= 2, what="the resolved message", timeout=10)
        for r in consoles:
            await r.drain()
        for j in jobs:
            j.cancel()
        await asyncio.gather(*jobs, return_exceptions=True)
        assert [x.json()["event"] for x in rx.got] == ["open", "resolved"]
        assert any(n.kind == "alert" for n in news)


def test_alert_test_cli_lines_and_exit_codes(tmp_path, capsys):
    with Receiver() as rx:
        path = tmp_path / "ok.toml"
        path.write_text(STATIONS + f'[alerts]\nwebhook = "{hook(rx)}"\nntfy = "{rx.base}/{TOKEN}"\n')
        assert main(["alert-test", "--config", str(path)]) == 0
        out = capsys.readouterr().out
        assert out.count("SENT") == 2 and TOKEN not in out
        kinds = sorted(r.json()["event"] if r.headers["Content-Type"] == "application/json" else r.headers["Tags"]
                       for r in rx.got)
        assert kinds == ["test", "test_tube,test,test"]
        assert main(["alert-test", "--config", str(path), "--json"]) == 0
        doc = json.loads(capsys.readouterr().out)
        assert [s["status"] for s in doc["sinks"]] == ["sent", "sent"] and TOKEN not in json.dumps(doc)
    with Receiver([500]) as rx:
        path = tmp_path / "bad.toml"
        path.write_text(STATIONS + f'[alerts]\nwebhook = "{hook(rx)}"\nretries = 0\n')
        assert main(["alert-test", "--config", str(path)]) == 1
        out = capsys.readouterr().out
        assert "FAILED" in out and "HTTP 500" in out and TOKEN not in out


@pytest.mark.parametrize("alerts, words", [
    ("", "no alert sink configured"),
    (f'webhook = "ftp://example.com/{TOKEN}"\n', "alerts.webhook: must start with http:// or https://"),
    (f'webhook = "https://example.com:99999/{TOKEN}"\n', "alerts.webhook: is not a valid URL"),
    ('webhook = 3\n', "alerts.webhook: must be string"),
    ('kinds = ["wedge", "coffee"]\n', "unknown kind 'coffee'"),
    ('max_per_hour = 0\n', "alerts.max_per_hour: must be from 1 to 3600"),
    ('pager = true\n', "alerts.pager: unknown field"),
])
def test_alert_test_bad_config_is_one_line_exit_2(tmp_path, capsys, alerts, words):
    path = tmp_path / "c.toml"
    path.write_text(STATIONS + "[alerts]\n" + alerts)
    assert main(["alert-test", "--config", str(path)]) == 2
    err = capsys.readouterr().err
    assert words in err and TOKEN not in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


async def test_a_ledger_that_cannot_be_written_still_pages_and_says_it_cleared(tmp_path):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the ledger's directory should be")
    with Receiver() as rx:
        cfg = config(f'webhook = "{hook(rx)}"\n')
        news: list = []
        rec = IncidentRecorder(cfg, Stations.for_config(cfg), news.append, ledger=Ledger(blocker / "l.sqlite3"),
                               capture=False)
        job = asyncio.create_task(rec.run())
        now = time.time()
        wedged = {"A": Verdict(Progress.WEDGED, now - 40, "wedged: frozen 40 s", station="A")}
        rec.tick(judgement(wedged, rec.stations.head_name, now), now)
        await until(lambda: len(rx.got) >= 1, what="the page without a ledger", timeout=10)
        moving = {"A": Verdict(Progress.PROGRESSING, now, "moving", station="A")}
        rec.tick(judgement(moving, rec.stations.head_name, now + 30), now + 30)
        await until(lambda: len(rx.got) >= 2, what="the resolved message", timeout=10)
        job.cancel()
        await asyncio.gather(job, return_exceptions=True)
        first, second = (r.json() for r in rx.got)
        assert first["kind"] == "wedge" and first["incident"] is None and second["event"] == "resolved"
        assert any(n.kind == "error" and "not written to the ledger" in n.text for n in news)
