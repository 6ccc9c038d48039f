"""The config schema written once (console/config/schema.py): the tables' known keys, kinds, required
keys, value rules and the TOML written back all come from the dataclasses, and the config example of
docs/configuration.md documents every key the schema knows."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from console.config import ApiSettings, Config, ConfigError, Station, UiSettings, parse_config, save_config
from console.config.alerts import AlertSettings
from console.config.errors import NUMBER
from console.config.fields import build, checks, kinds, setting, table, to_toml
from console.config.schema import IncidentSettings, RecoverSettings

CONFIG_DOC = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"


def readme_example() -> str:
    text = CONFIG_DOC.read_text()
    start = text.index("```toml\nprofile = ")
    return text[start + len("```toml\n"):text.index("```", start + 8)]


def documented_keys(example: str) -> dict[str, set[str]]:
    """Keys per table in docs/configuration.md's example (top level: before the first table header)."""
    out: dict[str, set[str]] = {"": set()}
    current = ""
    for line in example.splitlines():
        head = re.match(r"^\[\[?\s*([A-Za-z_.]+)\s*\]\]?", line)
        if head:
            current = head.group(1)
            out.setdefault(current, set())
            continue
        key = re.match(r"^([A-Za-z_][A-Za-z0-9_-]*)\s*=", line)
        if key:
            out[current].add(key.group(1))
    return out


def test_the_readme_example_documents_every_key_of_the_schema():
    doc = documented_keys(readme_example())
    assert set(table(Config)) <= doc[""] | {"stations", "api", "ui", "incidents", "alerts", "recover", "overrides", "keys"}
    assert set(table(Station)) == doc["stations"]
    assert set(table(ApiSettings)) == doc["api"]
    assert set(table(UiSettings)) == doc["ui"]
    assert set(table(IncidentSettings)) == doc["incidents"]
    assert set(table(AlertSettings)) == doc["alerts"]
    assert set(table(RecoverSettings)) == doc["recover"]


def test_the_readme_example_loads_and_round_trips():
    cfg = parse_config(readme_example(), "README.toml")
    assert cfg.stations[0].launch_script == "~/launch-glm53.sh" and cfg.ui.log_lines == 5000
    again = parse_config(_dumps(cfg), "README.toml")
    assert again == cfg


def _dumps(cfg: Config) -> str:
    import tomli_w

    from console.config import config_to_dict

    return tomli_w.dumps(config_to_dict(cfg))


def test_every_field_set_survives_save_and_load(tmp_path):
    text = """
profile = "glm53-flash-nvfp4-2x-gb10-sglang"
simulated = true
connect_timeout_s = 4.5
command_timeout_s = 12
launch_script = "~/top.sh"
[api]
url = "http://10.0.0.1:30000"
timeout_s = 7
api_key_env = "K_ENV"
api_key_file = "~/key"
[ui]
theme = "dgx-light"
refresh_ms = 500
log_lines = 900
[overrides]
max_running_requests = 8
[keys]
chat = "f6"
[[stations]]
name = "A"
host = "a"
rank = 0
user = "u"
port = 2200
rail_netdev = "eth9"
rdma_device = "mlx5_3"
rail_ip = "198.18.0.1"
container = "c1"
known_hosts = "~/kh"
identity_file = "~/id"
gpu = "GPU-1"
env_file = "~/e.env"
launch_script = "~/a.sh"
[[stations]]
name = "B"
rank = 1
local = true
"""
    cfg = parse_config(text, "x.toml")
    written = to_toml(cfg)
    # everything set is written back, defaults are not, plain values before tables before [[stations]]
    assert list(written) == ["profile", "simulated", "connect_timeout_s", "command_timeout_s", "launch_script",
                             "api", "ui", "overrides", "keys", "stations"]
    assert written["stations"][1] == {"name": "B", "host": "localhost", "rank": 1, "local": True}
    assert set(written["stations"][0]) == set(table(Station)) - {"local"}
    assert written["api"]["timeout_s"] == 7  # written as the operator wrote it
    path = tmp_path / "saved.toml"
    save_config(cfg, path)
    assert parse_config(path.read_text(), "x.toml") == cfg


def test_tables_come_from_the_dataclasses():
    assert kinds(Station)["port"] is int and kinds(Station)["local"] is bool and kinds(ApiSettings)["timeout_s"] == NUMBER
    assert [k for k, (_, required) in table(Station).items() if required] == ["name", "host", "rank"]
    assert "path" not in table(Config)  # not a TOML key
    assert list(checks(UiSettings)) == ["refresh_ms", "log_lines", "theme", "progress_window_s", "memory_floor_mib"]


@dataclasses.dataclass(frozen=True)
class _Demo:
    name: str = setting(check=lambda v: None if v.isalpha() else "letters only")
    size: float = setting(1.0, always=True)
    tags: tuple[str, ...] = ()
    inner: ApiSettings = dataclasses.field(default_factory=ApiSettings)
    note: str | None = setting(None, toml=False)


def test_a_new_field_is_one_edit_in_a_dataclass():
    """What the loaders and config_to_dict read from a dataclass, shown on a throwaway one."""
    assert table(_Demo) == {"name": (str, True), "size": (NUMBER, False), "tags": (list, False),
                            "inner": (dict, False)}
    assert checks(_Demo)["name"]("ab1") == "letters only"
    d = build(_Demo, {"name": "x", "size": 2, "tags": ["a"], "inner": {"timeout_s": 3}})
    assert d == _Demo("x", 2.0, ("a",), ApiSettings(timeout_s=3.0)) and isinstance(d.size, float)
    assert to_toml(_Demo("x")) == {"name": "x", "size": 1.0}
    assert to_toml(d) == {"name": "x", "size": 2.0, "tags": ("a",), "inner": {"timeout_s": 3.0}}


@pytest.mark.parametrize("text, message", [
    ('[ui]\nrefresh_ms = 50\n', "x.toml:2: ui.refresh_ms: must be >= 100"),
    ('[ui]\nlog_lines = 2000000\n', "x.toml:2: ui.log_lines: must be <= 1000000"),
    ('[api]\ntimeout_s = -1\napi_key_env = "1x"\n', "x.toml:2: api.timeout_s: must be a number of seconds > 0"),
    ('[api]\ncolour = 1\n', "x.toml:2: api.colour: unknown field (known: api_key_env, api_key_file, timeout_s, url)"),
])
def test_rules_from_field_metadata_keep_their_messages(text, message):
    with pytest.raises(ConfigError) as ei:
        parse_config(text + '[[stations]]\nname = "A"\nhost = "a"\nrank = 0\n', "x.toml")
    assert str(ei.value).startswith(message), str(ei.value)


def test_the_keys_table_of_the_config_doc_lists_every_binding_id():
    """[keys] takes any binding id the screens declare: docs/configuration.md must name each one (an
    operator remaps what the page shows), and none that no screen has."""
    from console.ui.keymap import known_bindings

    text = CONFIG_DOC.read_text()
    section = text[text.index("\n## Keys\n"):text.index("\n## Profiles and themes\n")]
    listed = set(re.findall(r"`([a-z0-9-]+)` \(", section))
    assert listed == set(known_bindings())
