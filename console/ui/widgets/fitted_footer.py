"""A footer that keeps the keys that matter when the terminal is narrow, on Textual's public API.

Textual's ``Footer`` lays every key in a row and cuts the row at the screen's edge: at 120 columns
the dashboard lost Restart, Theme and Help, the last ones declared. This one is compact (no padding
round the keys) and, when the keys do not all fit, leaves out the least important (``PRIORITY``,
by action) instead of the last; those stay in the help panel (F1) and the command palette.

Built from the screen's ``active_bindings`` (recomposed when its ``bindings_updated_signal`` says
they changed, and when the width changes), with the look of Textual's compact footer (the theme's
``$footer-*`` colours); a key runs its binding when clicked, the command palette's key sits on the
right. Binding groups are not drawn as groups (no binding of this app has one).
"""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import ScrollableContainer
from textual.screen import Screen
from textual.widget import Widget

# Most important first. Actions not listed come after these, in the order they are declared.
# The workbench (n, doctor) is the tool an NCCL finding leads to: it stays at every size (80x24, the
# fleet table's footer too, where Filter, with no log on screen, gives way first).
# h (the hang evidence) is the key the wedge banner names: it stays where the diagnosis does.
PRIORITY = ("toggle_help", "back_to_fleet", "open_station", "checks", "doctor", "toggle_diagnosis", "hang_evidence",
            "service('restart')", "filter", "investigate", "service('launch')", "service('stop')", "toggle_theme",
            "toggle_processes", "toggle_fleet", "chat", "bench", "quit")
PALETTE_WIDTH = 14  # "▏^p palette" docked on the right


class KeyHint(Widget):
    """One key of the footer: the key in bold, then what it does; a click presses it."""

    ALLOW_SELECT = False
    COMPONENT_CLASSES = {"key-hint--key", "key-hint--description"}
    DEFAULT_CSS = """
    KeyHint {
        width: auto;
        height: 1;
        text-wrap: nowrap;
        background: $footer-item-background;
        margin-right: 1;
        .key-hint--key {
            color: $footer-key-foreground;
            background: $footer-key-background;
            text-style: bold;
        }
        .key-hint--description {
            padding: 0 0 0 1;
            color: $footer-description-foreground;
            background: $footer-description-background;
        }
        &:hover {
            pointer: pointer;
            color: $footer-key-foreground;
            background: $block-hover-background;
        }
        &.-disabled {
            text-style: dim;
        }
        &.-command-palette {
            dock: right;
            border-left: vkey $foreground 20%;
        }
    }
    """

    def __init__(self, key: str, key_display: str, description: str, action: str, disabled: bool = False,
                 tooltip: str = "", classes: str = "") -> None:
        super().__init__(classes=classes + (" -disabled" if disabled else ""))
        self.key, self.key_display, self.description, self.action = key, key_display, description, action
        self.key_disabled = disabled
        self.set_reactive(Widget.shrink, False)  # a key is never squeezed
        if tooltip:
            self.tooltip = tooltip

    def render(self) -> Text:
        key_style = self.get_component_rich_style("key-hint--key")
        description_style = self.get_component_rich_style("key-hint--description")
        if self.description:
            pad = self.get_component_styles("key-hint--description").padding
            text = Text.assemble((self.key_display, key_style),
                                 (" " * pad.left + self.description + " " * pad.right, description_style))
        else:
            text = Text.assemble((self.key_display, key_style))
        text.stylize_before(self.rich_style)
        return text

    def on_mouse_down(self) -> None:
        if self.key_disabled:
            self.app.bell()
        else:
            self.app.simulate_key(self.key)


def _rank(action: str) -> int:
    name = action.removeprefix("app.").removeprefix("screen.")
    return PRIORITY.index(name) if name in PRIORITY else len(PRIORITY)


def key_width(key: KeyHint) -> int:
    """Cells a compact key takes: the key, a space, the label, and the gap after it."""
    return len(key.key_display) + (1 + len(key.description) if key.description else 0) + 1


def _looks(keys: list[KeyHint]) -> tuple:
    """What decides how the shown keys look and act: equal -> the footer stays as it is."""
    return tuple((k.key, k.key_display, k.description, k.action, k.key_disabled, str(k.tooltip or ""),
                  tuple(sorted(k.classes))) for k in keys)


def fitting(keys: list[KeyHint], width: int) -> list[KeyHint]:
    """The keys that fit in ``width`` cells, most important first, shown in their own order."""
    order = sorted(range(len(keys)), key=lambda i: (_rank(keys[i].action), i))
    kept: set[int] = set()
    used = 0
    for i in order:
        w = key_width(keys[i])
        if used + w <= width:
            kept.add(i)
            used += w
    return [k for i, k in enumerate(keys) if i in kept]


class FittedFooter(ScrollableContainer, can_focus=False, can_focus_children=False):
    """The screen's shown bindings, one key per action, fitted to the width by ``PRIORITY``."""

    ALLOW_SELECT = False
    DEFAULT_CSS = """
    FittedFooter {
        layout: horizontal;
        color: $footer-foreground;
        background: $footer-background;
        dock: bottom;
        height: 1;
        scrollbar-size: 0 0;
    }
    """

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.ready = False  # the screen's bindings are known (its first bindings_updated_signal)
        self.laid_out_width = 0
        self.composed: tuple | None = None  # what the shown keys look like (``_looks``)

    def keys(self) -> tuple[list[KeyHint], KeyHint | None]:
        """A key per action the screen shows (its first binding), and the command palette's key."""
        active = self.screen.active_bindings
        app = self.app
        keys: dict[str, KeyHint] = {}
        for _node, binding, enabled, tooltip in active.values():
            if binding.show and binding.action not in keys:
                keys[binding.action] = KeyHint(binding.key, app.get_key_display(binding), binding.description,
                                                 binding.action, disabled=not enabled, tooltip=tooltip)
        palette = None
        if app.ENABLE_COMMAND_PALETTE and app.COMMAND_PALETTE_BINDING in active:
            _node, binding, enabled, _tooltip = active[app.COMMAND_PALETTE_BINDING]
            palette = KeyHint(binding.key, app.get_key_display(binding), binding.description, binding.action,
                                disabled=not enabled, tooltip=binding.tooltip or binding.description,
                                classes="-command-palette")
        return list(keys.values()), palette

    def shown_keys(self) -> list[KeyHint]:
        """The keys to show at this width, the palette's last."""
        keys, palette = self.keys()
        if keys and self.size.width:
            keys = fitting(keys, self.size.width - (PALETTE_WIDTH if palette else 0))
        return keys + ([palette] if palette is not None else [])

    def compose(self) -> ComposeResult:
        if not self.ready:
            return
        keys = self.shown_keys()
        self.composed = _looks(keys)
        yield from keys

    async def _recompose_if_changed(self) -> None:
        """Recompose only when what the footer shows would change: the bindings signal comes on every
        focus change (a dozen times as the dashboard starts), mostly with the same keys."""
        if self.is_attached and (not self.ready or _looks(self.shown_keys()) != self.composed):
            await self.recompose()

    def on_mount(self) -> None:
        self.screen.bindings_updated_signal.subscribe(self, self.bindings_changed)

    def on_unmount(self) -> None:
        self.screen.bindings_updated_signal.unsubscribe(self)

    def bindings_changed(self, screen: Screen) -> None:
        self.ready = True
        if screen.app.app_focus and self.is_attached and screen is self.screen:
            self.call_after_refresh(self._recompose_if_changed)

    def on_resize(self) -> None:
        if self.size.width != self.laid_out_width:
            self.laid_out_width = self.size.width
            self.call_after_refresh(self._recompose_if_changed)
