"""The ``[keys]`` table of the config: binding ids -> keys, applied with Textual's ``App.set_keymap``.

Every key of the app has a binding id (``Binding(..., id="chat")``); the ids are collected from
the classes of ``console.ui`` (so a new screen's keys are remappable without a second list), and
the table is checked before the TUI starts: an unknown id, a key Textual cannot name, or two
keys of one screen on the same key is one line naming the file, the line and the field, exit 2.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from dataclasses import dataclass

from textual.binding import Binding
from textual.dom import DOMNode
from textual.keys import REPLACED_KEYS, Keys, _character_to_key, key_to_character

from console.config import Config, field_error

APP_OWNER = "ConsoleApp"  # its keys work on every screen
MODIFIERS = frozenset({"ctrl", "shift", "alt", "meta", "super", "hyper"})
_NAMED = frozenset(part for k in Keys for part in [k.value.rpartition("+")[2]] if len(part) > 1)


@dataclass(frozen=True)
class KnownBinding:
    id: str
    owner: str  # the class that declares it (DashboardScreen, ChatScreen...; ConsoleApp: every screen's)
    binding: Binding


def key_problem(keys: str) -> str | None:
    """Why ``keys`` ("f5", "ctrl+r", "ctrl+r,f5", "?") is not a key Textual can bind, or None."""
    for key in (k.strip() for k in keys.split(",")):
        if not key:
            return f"an empty key in {keys!r}"
        *mods, base = key.split("+") if key != "+" else ["+"]
        bad = [m for m in mods if m not in MODIFIERS]
        if bad or not base:
            return (f"{key!r}: {bad[0]!r} is not a modifier (ctrl, shift, alt, meta, super, hyper)" if bad
                    else f"{key!r}: no key after the modifier")
        if len(base) == 1 and base.isprintable():
            continue
        if base in _NAMED or base in REPLACED_KEYS or key_to_character(base) is not None:
            continue
        return (f"{key!r}: {base!r} is not a key name (examples: f5, ctrl+r, escape, enter, tab, space, "
                f"question_mark, slash, or a single character)")
    return None


def _normal(key: str) -> str:
    key = key.strip()
    *mods, base = key.split("+") if key != "+" else ["+"]
    if len(base) == 1 and not base.isalnum():
        base = _character_to_key(base)
    return "+".join([*mods, base])


def known_bindings() -> dict[str, KnownBinding]:
    """Every binding id declared by a class of ``console.ui`` (the app, its screens, widgets)."""
    import console.ui as ui

    found: dict[str, KnownBinding] = {}
    for mod in pkgutil.walk_packages(ui.__path__, prefix="console.ui."):
        module = importlib.import_module(mod.name)
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if not issubclass(cls, DOMNode) or cls.__module__ != module.__name__:
                continue
            for item in cls.__dict__.get("BINDINGS", ()):
                if isinstance(item, Binding) and item.id:
                    found.setdefault(item.id, KnownBinding(item.id, cls.__name__, item))
    return found


def check_keymap(config: Config) -> dict[str, str]:
    """The config's keymap, checked (ConfigError with the line on the first problem)."""
    if not config.keys:
        return {}
    known = known_bindings()
    for binding_id, keys in config.keys.items():
        if binding_id not in known:
            close = sorted(k for k in known if binding_id.split("-")[0] in k)[:6] or sorted(known)[:12]
            raise field_error(config, "keys", binding_id, f"unknown binding id (known: {', '.join(close)}, ...; "
                              "docs/configuration.md lists them all)")
        if problem := key_problem(keys):
            raise field_error(config, "keys", binding_id, problem)
    # two bindings of one screen may not end up on the same key; the app's shown keys (quit, theme,
    # help) are on every screen too
    def keys_of(kb: KnownBinding) -> list[str]:
        return [_normal(k) for k in config.keys.get(kb.id, kb.binding.key).split(",")]

    everywhere = {key: kb.id for kb in known.values() if kb.owner == APP_OWNER and kb.binding.show
                  for key in keys_of(kb)}
    by_owner: dict[str, dict[str, str]] = {}
    for kb in known.values():
        for key, raw in zip(keys_of(kb), config.keys.get(kb.id, kb.binding.key).split(","), strict=True):
            taken = by_owner.setdefault(kb.owner, dict(everywhere) if kb.owner != APP_OWNER else {})
            other = taken.get(key)
            if other is not None and other != kb.id:
                culprit = kb.id if kb.id in config.keys else other
                raise field_error(config, "keys", culprit, f"{raw.strip()!r} is also {other if culprit == kb.id else kb.id}'s "
                                  f"key on the same screen ({kb.owner})")
            taken[key] = kb.id
    return dict(config.keys)


def binding_table() -> list[tuple[str, str, str, str]]:
    """(id, screen, default keys, description) for the README and the help text."""
    rows = [(kb.id, kb.owner, kb.binding.key, kb.binding.description or kb.binding.tooltip or "")
            for kb in known_bindings().values()]
    return sorted(rows, key=lambda r: (r[1], r[0]))
