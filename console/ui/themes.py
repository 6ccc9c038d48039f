"""Themes: TOML files (``console/themes/`` and the user's XDG ``dgx-console/themes/``) ->
``textual.theme.Theme``. A user file with a built-in name overrides it."""

from __future__ import annotations

import tomllib
from importlib import resources

from textual.theme import Theme

from console.config import xdg_config_path

_FIELDS = ("primary", "secondary", "warning", "error", "success", "accent", "foreground", "background",
           "surface", "panel", "boost", "dark")


def _theme(data: dict, source: str) -> Theme:
    if "name" not in data or "primary" not in data:
        raise ValueError(f"{source}: a theme needs 'name' and 'primary'")
    kwargs = {k: data[k] for k in _FIELDS if k in data}
    return Theme(name=data["name"], variables=dict(data.get("variables", {})), **kwargs)


def load_themes(problems: list[str] | None = None) -> list[Theme]:
    """The built-in themes, then the user's; a user theme that cannot be read is left out and said in
    ``problems`` (one line each: the app shows them as a notice) rather than stopping the console."""
    themes: dict[str, Theme] = {}
    for res in sorted(resources.files("console.themes").iterdir(), key=lambda r: r.name):
        if res.name.endswith(".toml"):
            t = _theme(tomllib.loads(res.read_text()), res.name)
            themes[t.name] = t
    user_dir = xdg_config_path().parent / "themes"
    if user_dir.is_dir():
        for path in sorted(user_dir.glob("*.toml")):
            try:
                t = _theme(tomllib.loads(path.read_text()), str(path))
            except (OSError, ValueError, tomllib.TOMLDecodeError, TypeError) as exc:
                if problems is not None:
                    problems.append(f"theme {path.name} not loaded: {exc}")
                continue
            themes[t.name] = t
    return list(themes.values())
