"""How a config or profile problem is reported: ``PATH:LINE: field.path: message``.

tomllib keeps no positions, so :class:`Locator` finds the line of a table or key in the text; values
echoed in a message are repr'd and clipped (:func:`show`) so nothing odd reaches the terminal.
"""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING, Any

from console.sanitize import clip, one_line

if TYPE_CHECKING:
    import tomllib

BOM = "\ufeff"
NUMBER = (int, float)  # a TOML number: an integer or a float (never a bool)
Kind = type | tuple[type, ...]


class ConfigError(Exception):
    """A config problem reported as ``PATH:LINE: field.path: message``."""

    def __init__(self, path: str | os.PathLike | None, line: int | None, field_path: str, message: str):
        # one line, no control character, whatever the file held (field names and values are echoed)
        self.path = one_line(str(path)) if path else "<config>"
        self.line = line
        self.field_path = one_line(field_path)
        self.message = one_line(message)
        super().__init__(str(self))

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}" if self.line else self.path
        head = f"{where}: {self.field_path}: " if self.field_path else f"{where}: "
        return head + self.message


class Locator:
    """Finds the line of a field in TOML text (tomllib keeps no positions)."""

    def __init__(self, text: str):
        self.lines = text.removeprefix(BOM).splitlines()

    def _table_start(self, table: str, index: int | None) -> int | None:
        header = re.compile(r"^\s*\[\[\s*" + re.escape(table) + r"\s*\]\]" if index is not None
                            else r"^\s*\[\s*" + re.escape(table) + r"\s*\]")
        seen = -1
        for i, line in enumerate(self.lines):
            if header.match(line):
                seen += 1
                if index is None or seen == index:
                    return i
        return None

    def line_of(self, table: str | None, index: int | None, key: str | None) -> int | None:
        start = 0
        if table:
            t = self._table_start(table, index)
            if t is None:
                return None
            if key is None:
                return t + 1
            start = t + 1
        key_re = re.compile(r"^\s*" + re.escape(key or "") + r"\s*=") if key else None
        for i in range(start, len(self.lines)):
            line = self.lines[i]
            if re.match(r"^\s*\[", line):
                break
            if key_re and key_re.match(line):
                return i + 1
        if key and not table:  # a top-level key written as a table: [zzz], [[zzz]], [zzz.sub]
            head = re.compile(r"^\s*\[\[?\s*" + re.escape(key) + r"\s*[\].]")
            for i, line in enumerate(self.lines):
                if head.match(line):
                    return i + 1
        return start or None


def parse_toml(text: str, src: str | os.PathLike | None) -> dict[str, Any]:
    """tomllib with every failure as a ConfigError (a deeply nested document overflows its stack).
    tomllib loads here: the schema (and every simulated command, through the profile) imports this
    module only for its errors (~4 ms of each command's start)."""
    import tomllib

    try:
        # a byte-order mark (Windows editors write one): not TOML, but nothing else either; line
        # numbers stay the same
        return tomllib.loads(text.removeprefix(BOM))
    except tomllib.TOMLDecodeError as exc:
        msg = str(exc).split(" (at ")[0]
        raise ConfigError(src, _toml_error_line(exc), "", f"invalid TOML: {msg}") from None
    except RecursionError:
        raise ConfigError(src, None, "", "invalid TOML: nested too deeply") from None
    except (ValueError, TypeError, OverflowError) as exc:  # a value tomllib cannot build
        raise ConfigError(src, None, "", f"invalid TOML: {one(exc)}") from None


def _toml_error_line(exc: tomllib.TOMLDecodeError) -> int | None:
    m = re.search(r"line (\d+)", str(exc))
    return int(m.group(1)) if m else None


def check_type(value: Any, want: Kind) -> bool:
    """Is ``value`` of the TOML kind ``want`` (an integer is never a bool; a number is int or float)."""
    if want is int or want == (int,):
        return isinstance(value, int) and not isinstance(value, bool)
    if want == NUMBER:
        return isinstance(value, NUMBER) and not isinstance(value, bool)
    return isinstance(value, want)


def type_name(want: Kind) -> str:
    if isinstance(want, tuple):
        return "number"
    return {str: "string", int: "integer", bool: "true or false", float: "number", dict: "a table",
            list: "a list"}[want]


def show(value: Any) -> str:
    """A value echoed in a message: repr (escapes every control character), clipped."""
    return clip(repr(value), 80)


def one(exc: BaseException) -> str:
    """An exception as one short line."""
    return clip(" ".join(str(exc).split()) or type(exc).__name__, 200)


def key_path(key: str) -> str:
    """A TOML key as it may appear in a message (quoted when it is not a bare key)."""
    return key if re.fullmatch(r"[A-Za-z0-9_-]{1,64}", key) else show(key)
