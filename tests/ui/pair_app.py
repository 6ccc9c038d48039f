"""The real app on a two-station config with no services (the test posts what the station
services would): shared by the screen tests (engine phase, conventions, colours, keys)."""

from __future__ import annotations

import io

from rich.console import Console

from console.config import Config, parse_config
from console.ui.app import ConsoleApp
from tests.two_stations import stations_toml

GB300 = "glm53-nvfp4-2x-gb300-vllm"
GB10 = "glm53-flash-nvfp4-2x-gb10-sglang"


def pair_config_text(profile: str = GB300, api_url: str | None = None, extra: str = "") -> str:
    api = f'[api]\nurl = "{api_url}"\n\n' if api_url else ""
    return f'profile = "{profile}"\n\n{api}' + stations_toml("127.0.0.1", "127.0.0.2", rail=False) + extra


def pair_config(tmp_path=None, **kw) -> Config:
    return parse_config(pair_config_text(**kw), str(tmp_path / "c.toml") if tmp_path else None)


def pair_app(tmp_path=None, theme: str | None = None, **kw) -> ConsoleApp:
    return ConsoleApp(pair_config(tmp_path, **kw), start_services=False, clock=False, theme=theme)


def pane_text(app, name) -> str:
    """What a station pane's Static widgets draw, as plain text at the pane's width (a pane's
    status is a renderable that lays itself out for the width, not a string)."""
    pane = app.panes[name]
    console = Console(width=max(20, pane.size.width or 100), record=True, file=io.StringIO(), color_system=None)
    for w in pane.query("Static"):
        console.print(w.content)
    return console.export_text()
