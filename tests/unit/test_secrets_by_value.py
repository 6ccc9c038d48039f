"""Secrets by value, not only by name: a password in a URL's userinfo (api.url, a proxy
variable, any extra_env value), the proxy variables themselves, and every value the config knows to be
secret are masked wherever text leaves the console: the launch preview and argv, ``masked_overrides``,
free text, and the one place log text enters (``LogStream.ingest``, fed with ``config.masker``), so the
screen's log view, ``watch --logs`` and a launch's progress never show them (SGLang prints its server args
with the API key)."""

from __future__ import annotations

import pytest

from console.config import Station, masked_overrides, masker, parse_config, secret_values
from console.secrets import MASK, is_secret_name, is_secret_value, mask_url, redact_text
from console.service import engines
from console.station.log_sources import HeadlessLogs
from console.station.logstream import LogStream
from console.station.messages import LogBatch
from console.station.monitor import StationService
from tests.two_stations import TWO_STATIONS

PROXY_PW, URL_PW, FOO_PW, DB_PW, API_KEY = "PROXYPW_y2", "URLPW_s3cret", "FOOPW_v7", "PASSWDVAL_x1", "sk-APIKEY_q9"
CONFIG = f"""
profile = "glm53-nvfp4-2x-gb300-vllm"
[api]
url = "http://apiuser:{URL_PW}@127.0.0.1:8000"
api_key_env = "DGX_BY_VALUE_KEY"
[overrides]
extra_args = ["--enforce-eager"]
[overrides.extra_env]
HTTPS_PROXY = "http://puser:{PROXY_PW}@proxy.example:3128"
no_proxy = "localhost,127.0.0.1"
FOO_URL = "https://fuser:{FOO_PW}@repo.example/simple"
DB_PASSWD = "{DB_PW}"
NCCL_IB_TC = "106"

""" + TWO_STATIONS
VALUES = (PROXY_PW, URL_PW, FOO_PW, DB_PW, API_KEY)
RT = engines.StationRuntime(("GPU-1111",), "repo/image@sha256:" + "ab" * 32)


@pytest.fixture
def cfg(monkeypatch):
    monkeypatch.setenv("DGX_BY_VALUE_KEY", API_KEY)
    return parse_config(CONFIG)


def clear(text: str) -> bool:
    return not any(v in text for v in VALUES)


@pytest.mark.parametrize("name", ["HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "ALL_PROXY", "ftp_proxy",
                                  "DB_PASSWD", "APP_PWD", "MY_AUTH"])
def test_proxy_variables_and_password_words_are_secret_names(name):
    assert is_secret_name(name)


@pytest.mark.parametrize("name", ["NO_PROXY", "no_proxy", "PROXY", "PWD", "SSH_AUTH_SOCK"])
def test_no_proxy_and_plain_words_are_not(name):
    assert not is_secret_name(name)


@pytest.mark.parametrize("text,shown", [
    ("http://u:pw@h:3128", f"http://u:{MASK}@h:3128"),
    ("see https://ghp_abcdef@github.com/x.git", f"see https://{MASK}@github.com/x.git"),
    ("ssh://root@station-a", "ssh://root@station-a"),
    ("mail root@station-a", "mail root@station-a"),
    ("http://host/path?x=a@b", "http://host/path?x=a@b"),
    ("Url: 'http://a:b@c/v1' and socks5://x:y@z", f"Url: 'http://a:{MASK}@c/v1' and socks5://x:{MASK}@z"),
])
def test_url_userinfo_is_masked(text, shown):
    assert mask_url(text) == shown
    assert redact_text(text) == shown


def test_a_value_with_url_credentials_is_secret_whatever_its_name():
    assert is_secret_value("https://u:p@h") and not is_secret_value("https://h/x") and not is_secret_value(3)


def test_secret_values_and_masked_overrides_carry_the_url_passwords(cfg):
    values = secret_values(cfg)
    for v in VALUES:
        assert any(v in s for s in values), v
    shown = repr(masked_overrides(cfg))
    assert clear(shown) and "localhost,127.0.0.1" in shown and "106" in shown
    assert clear(cfg.api_url_shown()) and cfg.api_url_shown().endswith("@127.0.0.1:8000")


@pytest.mark.parametrize("station", ["A", "B"])
def test_launch_argv_and_preview_hold_no_secret_value(cfg, station):
    spec = engines.build_launch(cfg, cfg.station(station), RT, api_key_set=True)
    assert clear(spec.command()) and clear(spec.preview()) and all(clear(a) for a in spec.argv)
    for name in ("HTTPS_PROXY", "FOO_URL", "DB_PASSWD"):
        assert spec.argv[spec.argv.index(name) - 1] == "-e" and name in spec.secret_env  # by name, on stdin
    assert "no_proxy=localhost,127.0.0.1" in spec.argv
    stdin = engines.secret_input(cfg, spec, API_KEY) or ""
    assert PROXY_PW in stdin and FOO_PW in stdin  # the values still reach the container


@pytest.mark.parametrize("extra", ['extra_args = ["--hf-endpoint=https://u:pw1234@hub.example"]',
                                   'download_dir = "http://u:pw1234@h/x"'])
def test_a_url_password_as_an_engine_flag_is_refused(monkeypatch, extra):
    c = parse_config(CONFIG.replace('extra_args = ["--enforce-eager"]', extra))
    with pytest.raises(engines.EngineConfigError, match="never goes on a command line"):
        engines.build_launch(c, c.station("A"), RT)


SGLANG_ARGS = (f"server_args=ServerArgs(model_path='/models/x', api_key='{API_KEY}', tp_size=2, "
               f"hf_endpoint='https://u:{FOO_PW}@hub.example')")


def _lines(batches: list[LogBatch]) -> list[str]:
    return [str(x) for b in batches for x in b.lines]


class NoTransport:
    async def run(self, command, timeout=None):  # pragma: no cover - never called here
        raise AssertionError(command)


def test_log_lines_are_masked_where_they_enter_the_monitor(cfg):
    """The monitor's LogStream (the TUI's log view and ``watch --logs`` read its batches)."""
    posted: list = []
    svc = StationService(cfg, cfg.station("A"), posted.append, transport=NoTransport())  # type: ignore[arg-type]
    for line in (SGLANG_ARGS, f"proxy is {PROXY_PW} here", f"db {DB_PW}", "plain line 42"):
        svc.logs.ingest("2026-01-01T00:00:00.000000000Z " + line)
    svc.logs.flush()
    lines = _lines([m for m in posted if isinstance(m, LogBatch)])
    assert len(lines) == 4 and all(clear(x) for x in lines), lines
    assert "plain line 42" in lines[3] and f"api_key='{MASK}'" in lines[0]


def test_headless_logs_mask_with_the_config(cfg):
    """A launch's own stream (the CLI's progress lines) masks the same way."""
    logs = HeadlessLogs({"A": NoTransport()}, mask=masker(cfg))  # type: ignore[dict-item]
    assert logs.mask(SGLANG_ARGS) == masker(cfg)(SGLANG_ARGS) and clear(logs.mask(SGLANG_ARGS))


def test_a_stream_without_a_config_still_masks_by_name():
    got: list[LogBatch] = []
    s = LogStream(Station(name="A", host="h", rank=0), NoTransport(), 10, on_batches=got.extend)  # type: ignore[arg-type]
    s.ingest(SGLANG_ARGS)
    s.flush()
    assert API_KEY not in _lines(got)[0] and FOO_PW not in _lines(got)[0]
