"""A bounded reader of pickled plain data (a flight recorder dump from a station is untrusted).

Not ``pickle.Unpickler``: that one hashes whatever a dict key or set member is (a tuple of tuples
shared through the memo hashes in time exponential in its depth: a few hundred bytes keep a CPU
busy for minutes), runs ``BUILD`` on whatever global it was allowed (setting attributes on our own
function) and has no limit on what it builds. This is a small stack machine over
``pickletools.genops`` that knows only the opcodes of plain data:

* containers (list, tuple, dict, set, frozenset), str, bytes, int, float, bool, None, the memo;
* the four TorchScript list helpers (``torch.jit._pickle.build_intlist`` ...) and
  ``restore_type_tag``, applied here by name (no callable is ever looked up or called);
* every other opcode (classes, ``BUILD``, persistent ids, extensions, out-of-band buffers) refused.

Limits: the data's size, the number of opcodes, the depth of nested marks, the number of items a
container holds. Dict keys and set members must be scalars (str, bytes, int, float, bool, None):
hashing a scalar costs its length, never a walk. Numbers are returned as Python reads them; the
caller range-checks what it uses. The result may share objects (a DAG): walk it with
:func:`bounded_walk`-style care, never with ``str()``/``hash()``/``json.dumps``.
"""

from __future__ import annotations

import pickletools
from collections.abc import Callable
from typing import Any

MAX_OPS = 4_000_000
MAX_MARKS = 256  # nested MARKs (list/tuple/dict literals inside each other)
MAX_STACK = 1_000_000


class PickleRefused(ValueError):
    """The data is not plain pickled data within the limits; the message says why."""


_SCALAR = (str, bytes, int, float, bool, type(None))
_TORCH_LISTS = {"build_intlist", "build_doublelist", "build_boollist", "build_list", "build_tensorlist"}


class _Global:
    """A named TorchScript helper (a marker on the stack; nothing is imported or called)."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name


def _key(obj: Any) -> Any:
    if not isinstance(obj, _SCALAR):
        raise PickleRefused(f"a dict key or set member of type {type(obj).__name__} (only scalars are read)")
    return obj


def _check(obj: Any) -> Any:
    if isinstance(obj, _Global):
        raise PickleRefused(f"a bare reference to {obj.name}")
    return obj


def loads(data: bytes, max_ops: int = MAX_OPS) -> Any:
    """The plain data in ``data``; PickleRefused for anything else or past a limit."""
    try:
        return _Reader().run(data, max_ops)
    except PickleRefused:
        raise
    except (ValueError, TypeError, IndexError, KeyError, OverflowError, UnicodeDecodeError, MemoryError) as exc:
        raise PickleRefused(f"not a readable pickle: {type(exc).__name__}: {str(exc)[:160]}") from None


class _Reader:
    """The stack machine: one handler per opcode (``_HANDLERS``), so an opcode costs one dict lookup
    and whatever is not in the table is refused by default."""

    __slots__ = ("stack", "marks", "memo")

    def __init__(self) -> None:
        self.stack: list[Any] = []
        self.marks: list[int] = []
        self.memo: dict[int, Any] = {}

    def run(self, data: bytes, max_ops: int) -> Any:
        """Feed every opcode to its handler, the limits checked before each; the value at STOP."""
        stack = self.stack
        ops = 0
        for op, arg, _pos in pickletools.genops(data):
            ops += 1
            if ops > max_ops:
                raise PickleRefused(f"more than {max_ops:,} opcodes")
            if len(stack) > MAX_STACK:
                raise PickleRefused("too many items at once")
            name = op.name
            if name == "STOP":
                return self.stop()
            handler = _HANDLERS.get(name)
            if handler is None:
                raise PickleRefused(f"opcode {name} (not plain data)")
            handler(self, name, arg)
        raise PickleRefused("no STOP: the pickle is cut")

    # ---------------------------------------------------------------- the stack itself

    def take_to_mark(self) -> list[Any]:
        """The items above the innermost MARK, taken off the stack."""
        if not self.marks:
            raise PickleRefused("an item list without its MARK")
        at = self.marks.pop()
        items = self.stack[at:]
        del self.stack[at:]
        return items

    def top(self) -> Any:
        if not self.stack:
            raise PickleRefused("an empty stack")
        return self.stack[-1]

    def stop(self) -> Any:
        """The one value left; a stray mark or item means the pickle is not what it claims."""
        if len(self.stack) != 1 or self.marks:
            raise PickleRefused("STOP with a malformed stack")
        return _check(self.stack[0])

    def skip(self, name: str, arg: Any) -> None:
        """Framing and the protocol number carry no data."""

    def mark(self, name: str, arg: Any) -> None:
        if len(self.marks) >= MAX_MARKS:
            raise PickleRefused(f"more than {MAX_MARKS} nested marks")
        self.marks.append(len(self.stack))

    def drop_top(self, name: str, arg: Any) -> None:
        if not self.stack:
            raise PickleRefused("POP on an empty stack")
        self.stack.pop()

    def drop_to_mark(self, name: str, arg: Any) -> None:
        self.take_to_mark()

    def dup(self, name: str, arg: Any) -> None:
        self.stack.append(self.top())

    # ---------------------------------------------------------------- scalars and empty containers

    def push_constant(self, name: str, arg: Any) -> None:
        self.stack.append(_CONSTANTS[name])

    def push_arg(self, name: str, arg: Any) -> None:
        """genops has already decoded the scalar."""
        self.stack.append(arg)

    def push_bytearray(self, name: str, arg: Any) -> None:
        """Read as bytes: a mutable bytearray is no plain-data value."""
        self.stack.append(bytes(arg))

    def push_empty(self, name: str, arg: Any) -> None:
        self.stack.append(_EMPTY[name]())

    # ---------------------------------------------------------------- containers built from the stack

    def build_list(self, name: str, arg: Any) -> None:
        self.stack.append([_check(x) for x in self.take_to_mark()])

    def build_tuple(self, name: str, arg: Any) -> None:
        self.stack.append(tuple(_check(x) for x in self.take_to_mark()))

    def build_small_tuple(self, name: str, arg: Any) -> None:
        """TUPLE1/TUPLE2/TUPLE3: the size is the opcode's last character."""
        stack = self.stack
        n = int(name[-1])
        if len(stack) < n:
            raise PickleRefused(f"{name} on a short stack")
        items = stack[-n:]
        del stack[-n:]
        stack.append(tuple(_check(x) for x in items))

    def build_dict(self, name: str, arg: Any) -> None:
        items = self.take_to_mark()
        self.stack.append(_pairs({}, items))

    def build_frozenset(self, name: str, arg: Any) -> None:
        self.stack.append(frozenset(_key(x) for x in self.take_to_mark()))

    # ---------------------------------------------------------------- containers filled in place

    def append_one(self, name: str, arg: Any) -> None:
        stack = self.stack
        if len(stack) < 2 or not isinstance(stack[-2], list):
            raise PickleRefused("APPEND to something not a list")
        stack[-2].append(_check(stack.pop()))

    def append_many(self, name: str, arg: Any) -> None:
        items = self.take_to_mark()
        if not isinstance(self.top(), list):
            raise PickleRefused("APPENDS to something not a list")
        self.stack[-1].extend(_check(x) for x in items)

    def set_item(self, name: str, arg: Any) -> None:
        stack = self.stack
        if len(stack) < 3 or not isinstance(stack[-3], dict):
            raise PickleRefused("SETITEM on something not a dict")
        v, k = _check(stack.pop()), stack.pop()
        stack[-1][_key(k)] = v

    def set_items(self, name: str, arg: Any) -> None:
        items = self.take_to_mark()
        if not isinstance(self.top(), dict):
            raise PickleRefused("SETITEMS on something not a dict")
        _pairs(self.stack[-1], items)

    def add_items(self, name: str, arg: Any) -> None:
        items = self.take_to_mark()
        if not isinstance(self.top(), set):
            raise PickleRefused("ADDITEMS on something not a set")
        self.stack[-1].update(_key(x) for x in items)

    # ---------------------------------------------------------------- the memo

    def put(self, name: str, arg: Any) -> None:
        self.memo[int(arg)] = self.top()

    def memoize(self, name: str, arg: Any) -> None:
        self.memo[len(self.memo)] = self.top()

    def get(self, name: str, arg: Any) -> None:
        if int(arg) not in self.memo:
            raise PickleRefused(f"memo {arg} read before it was written")
        self.stack.append(self.memo[int(arg)])

    # ---------------------------------------------------------------- the TorchScript helpers, by name only

    def text_global(self, name: str, arg: Any) -> None:
        module, _sp, qual = str(arg).partition(" ")
        self.push_helper(module, qual)

    def stack_global(self, name: str, arg: Any) -> None:
        stack = self.stack
        if len(stack) < 2 or not all(isinstance(x, str) for x in stack[-2:]):
            raise PickleRefused("STACK_GLOBAL without two names")
        qual = stack.pop()
        module = stack.pop()
        self.push_helper(module, qual)

    def push_helper(self, module: str, qual: str) -> None:
        """A marker for an allowed helper; any other global is refused before anything is looked up."""
        if module != "torch.jit._pickle" or (qual not in _TORCH_LISTS and qual != "restore_type_tag"):
            raise PickleRefused(f"refusing to load {module[:80]}.{qual[:80]} from a dump")
        self.stack.append(_Global(qual))

    def reduce(self, name: str, arg: Any) -> None:
        """Apply a helper by name: the list helpers make a list of their argument, the rest return it."""
        stack = self.stack
        if len(stack) < 2:
            raise PickleRefused("REDUCE on a short stack")
        args, fn = stack.pop(), stack.pop()
        if not isinstance(fn, _Global) or not isinstance(args, tuple) or not args:
            raise PickleRefused("REDUCE of something not a TorchScript list helper")
        value = args[0]
        if fn.name in _TORCH_LISTS:
            if not isinstance(value, (list, tuple)):
                raise PickleRefused(f"{fn.name} of a {type(value).__name__}")
            value = list(value)
        stack.append(_check(value))


_CONSTANTS = {"NONE": None, "NEWTRUE": True, "NEWFALSE": False}
_EMPTY: dict[str, Callable[[], Any]] = {"EMPTY_LIST": list, "EMPTY_TUPLE": tuple, "EMPTY_DICT": dict,
                                        "EMPTY_SET": set}
_SCALAR_OPS = ("INT", "BININT", "BININT1", "BININT2", "LONG", "LONG1", "LONG4", "FLOAT", "BINFLOAT",
               "STRING", "BINSTRING", "SHORT_BINSTRING", "UNICODE", "BINUNICODE", "SHORT_BINUNICODE",
               "BINUNICODE8", "BINBYTES", "SHORT_BINBYTES", "BINBYTES8")

#: Opcode name -> handler. STOP is the loop's own; every opcode not named here is refused.
_HANDLERS: dict[str, Callable[[_Reader, str, Any], None]] = {
    "PROTO": _Reader.skip, "FRAME": _Reader.skip,
    "MARK": _Reader.mark, "POP": _Reader.drop_top, "POP_MARK": _Reader.drop_to_mark, "DUP": _Reader.dup,
    **dict.fromkeys(_CONSTANTS, _Reader.push_constant),
    **dict.fromkeys(_SCALAR_OPS, _Reader.push_arg),
    "BYTEARRAY8": _Reader.push_bytearray,
    **dict.fromkeys(_EMPTY, _Reader.push_empty),
    "LIST": _Reader.build_list, "TUPLE": _Reader.build_tuple,
    **dict.fromkeys(("TUPLE1", "TUPLE2", "TUPLE3"), _Reader.build_small_tuple),
    "DICT": _Reader.build_dict, "FROZENSET": _Reader.build_frozenset,
    "APPEND": _Reader.append_one, "APPENDS": _Reader.append_many,
    "SETITEM": _Reader.set_item, "SETITEMS": _Reader.set_items, "ADDITEMS": _Reader.add_items,
    **dict.fromkeys(("PUT", "BINPUT", "LONG_BINPUT"), _Reader.put), "MEMOIZE": _Reader.memoize,
    **dict.fromkeys(("GET", "BINGET", "LONG_BINGET"), _Reader.get),
    "GLOBAL": _Reader.text_global, "STACK_GLOBAL": _Reader.stack_global, "REDUCE": _Reader.reduce,
}


def _pairs(target: dict[Any, Any], items: list[Any]) -> dict[Any, Any]:
    if len(items) % 2:
        raise PickleRefused("a dict with an odd number of items")
    for i in range(0, len(items), 2):
        target[_key(items[i])] = _check(items[i + 1])
    return target
