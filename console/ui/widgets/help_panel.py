"""The help panel (F1 / ?): the keys of the app and of the screen first, one line each, then the
focused widget's own (a log's scroll keys, a table's cursor keys).

Textual's ``HelpPanel`` lists the focused widget's bindings first, each description followed by its
tooltip wrapped over several lines: at 80x24 the panel opened on a log's scroll keys and the app's own
keys (checks, the workbench, launch) were below the fold. Built on the public ``HelpPanel``
and ``KeyPanel`` (which recomposes when the screen's bindings change) and the screen's
``active_bindings``."""

from __future__ import annotations

from collections import defaultdict

from rich import box
from rich.table import Table
from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import HelpPanel, KeyPanel, Static

from console.ui.see_key import ROWS


def _group(namespace: object, binding: Binding) -> int:
    """0: the screen's keys, 1: the console's app-wide keys (each of the console's keys has an id),
    2: Textual's own screen and app keys (focus, copy), 3: the focused widget's."""
    if isinstance(namespace, (Screen, App)):
        if not binding.id:
            return 2
        return 0 if isinstance(namespace, Screen) else 1
    return 3


class AppKeysTable(Static):
    """One line per action: the key, what it does, the tooltip dimmed and cut at the edge."""

    COMPONENT_CLASSES = {"app-keys--key", "app-keys--description"}
    DEFAULT_CSS = """
    AppKeysTable { width: 1fr; height: auto; }
    AppKeysTable > .app-keys--key { color: $text-accent; text-style: bold; }
    AppKeysTable > .app-keys--description { color: $foreground; }
    """

    def render(self) -> Table:
        active = list(self.screen.active_bindings.values())
        ordered = sorted(active, key=lambda b: _group(b[0], b[1]))  # stable: each group in its own order
        key_style = self.get_component_rich_style("app-keys--key")
        description_style = self.get_component_rich_style("app-keys--description")
        table = Table(padding=(0, 1, 0, 0), show_header=False, box=box.SIMPLE_HEAD, show_edge=False, expand=True)
        table.add_column("", justify="right", no_wrap=True, overflow="ellipsis", max_width=9)
        table.add_column("", no_wrap=True, overflow="ellipsis", ratio=1)
        by_action: defaultdict[tuple[int, str], list[Binding]] = defaultdict(list)
        for namespace, binding, _enabled, _tooltip in ordered:
            if not binding.system:
                by_action[(_group(namespace, binding), binding.action)].append(binding)
        last = None
        for (group, _action), bindings in by_action.items():
            if last is not None and group != last and group >= 2:
                table.add_section()  # Textual's and the focused widget's keys below a rule
            last = group
            keys = " ".join(dict.fromkeys(self.app.get_key_display(b) for b in bindings))
            first = bindings[0]
            text = Text(first.description, style=description_style, no_wrap=True, overflow="ellipsis")
            if first.tooltip:
                text.append(("  " if first.description else "") + first.tooltip, "dim")
            table.add_row(Text(keys, style=key_style), text)
        return table


class SeeKeyTable(Static):
    """What you see -> which key (``console/ui/see_key.py``), under the keys: a tired operator starts
    from what the screen shows, not from a key's name."""

    DEFAULT_CSS = """
    SeeKeyTable { width: 1fr; height: auto; margin-top: 1; }
    """

    def render(self) -> Text:
        """Each row on its own lines, wrapped, never cut: the panel is narrow (27 columns at 80x24)."""
        out = Text("what you see → which key", style="bold")
        for see, key in ROWS:
            out.append("\n")
            out.append(see, style="dim")
            out.append("\n  → ")
            out.append(key)
        return out


class AppKeysPanel(KeyPanel):
    """The keys, then what you see -> which key, in the one scrolling panel."""

    def compose(self) -> ComposeResult:
        yield AppKeysTable()
        yield SeeKeyTable(id="see-key")


class ConsoleHelpPanel(HelpPanel):
    """Textual's help panel with the app's keys first (no widget prose above them), then what you see
    -> which key."""

    def compose(self) -> ComposeResult:
        yield AppKeysPanel(id="keys-help")
