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
    stack: list[Any] = []
    marks: list[int] = []
    memo: dict[int, Any] = {}
    ops = 0

    def pop_mark() -> list[Any]:
        if not marks:
            raise PickleRefused("an item list without its MARK")
        at = marks.pop()
        items = stack[at:]
        del stack[at:]
        return items

    def top() -> Any:
        if not stack:
            raise PickleRefused("an empty stack")
        return stack[-1]

    try:
        for op, arg, _pos in pickletools.genops(data):
            ops += 1
            if ops > max_ops:
                raise PickleRefused(f"more than {max_ops:,} opcodes")
            if len(stack) > MAX_STACK:
                raise PickleRefused("too many items at once")
            name = op.name
            if name in ("PROTO", "FRAME"):
                continue
            if name == "STOP":
                if len(stack) != 1 or marks:
                    raise PickleRefused("STOP with a malformed stack")
                return _check(stack[0])
            if name == "MARK":
                if len(marks) >= MAX_MARKS:
                    raise PickleRefused(f"more than {MAX_MARKS} nested marks")
                marks.append(len(stack))
            elif name == "POP":
                if not stack:
                    raise PickleRefused("POP on an empty stack")
                stack.pop()
            elif name == "POP_MARK":
                pop_mark()
            elif name == "DUP":
                stack.append(top())
            elif name in ("NONE", "NEWTRUE", "NEWFALSE"):
                stack.append({"NONE": None, "NEWTRUE": True, "NEWFALSE": False}[name])
            elif name in ("INT", "BININT", "BININT1", "BININT2", "LONG", "LONG1", "LONG4", "FLOAT", "BINFLOAT",
                          "STRING", "BINSTRING", "SHORT_BINSTRING", "UNICODE", "BINUNICODE", "SHORT_BINUNICODE",
                          "BINUNICODE8", "BINBYTES", "SHORT_BINBYTES", "BINBYTES8", "BYTEARRAY8"):
                stack.append(bytes(arg) if name == "BYTEARRAY8" else arg)
            elif name == "EMPTY_LIST":
                stack.append([])
            elif name == "EMPTY_TUPLE":
                stack.append(())
            elif name == "EMPTY_DICT":
                stack.append({})
            elif name == "EMPTY_SET":
                stack.append(set())
            elif name == "LIST":
                stack.append([_check(x) for x in pop_mark()])
            elif name == "TUPLE":
                stack.append(tuple(_check(x) for x in pop_mark()))
            elif name in ("TUPLE1", "TUPLE2", "TUPLE3"):
                n = int(name[-1])
                if len(stack) < n:
                    raise PickleRefused(f"{name} on a short stack")
                items = stack[-n:]
                del stack[-n:]
                stack.append(tuple(_check(x) for x in items))
            elif name == "DICT":
                items = pop_mark()
                stack.append(_pairs({}, items))
            elif name == "FROZENSET":
                stack.append(frozenset(_key(x) for x in pop_mark()))
            elif name == "APPEND":
                if len(stack) < 2 or not isinstance(stack[-2], list):
                    raise PickleRefused("APPEND to something not a list")
                stack[-2].append(_check(stack.pop()))
            elif name == "APPENDS":
                items = pop_mark()
                if not isinstance(top(), list):
                    raise PickleRefused("APPENDS to something not a list")
                stack[-1].extend(_check(x) for x in items)
            elif name == "SETITEM":
                if len(stack) < 3 or not isinstance(stack[-3], dict):
                    raise PickleRefused("SETITEM on something not a dict")
                v, k = _check(stack.pop()), stack.pop()
                stack[-1][_key(k)] = v
            elif name == "SETITEMS":
                items = pop_mark()
                if not isinstance(top(), dict):
                    raise PickleRefused("SETITEMS on something not a dict")
                _pairs(stack[-1], items)
            elif name == "ADDITEMS":
                items = pop_mark()
                if not isinstance(top(), set):
                    raise PickleRefused("ADDITEMS on something not a set")
                stack[-1].update(_key(x) for x in items)
            elif name in ("PUT", "BINPUT", "LONG_BINPUT"):
                memo[int(arg)] = top()
            elif name == "MEMOIZE":
                memo[len(memo)] = top()
            elif name in ("GET", "BINGET", "LONG_BINGET"):
                if int(arg) not in memo:
                    raise PickleRefused(f"memo {arg} read before it was written")
                stack.append(memo[int(arg)])
            elif name in ("GLOBAL", "STACK_GLOBAL"):
                if name == "GLOBAL":
                    module, _sp, qual = str(arg).partition(" ")
                else:
                    if len(stack) < 2 or not all(isinstance(x, str) for x in stack[-2:]):
                        raise PickleRefused("STACK_GLOBAL without two names")
                    qual = stack.pop()
                    module = stack.pop()
                if module != "torch.jit._pickle" or (qual not in _TORCH_LISTS and qual != "restore_type_tag"):
                    raise PickleRefused(f"refusing to load {module[:80]}.{qual[:80]} from a dump")
                stack.append(_Global(qual))
            elif name == "REDUCE":
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
            else:
                raise PickleRefused(f"opcode {name} (not plain data)")
    except PickleRefused:
        raise
    except (ValueError, TypeError, IndexError, KeyError, OverflowError, UnicodeDecodeError, MemoryError) as exc:
        raise PickleRefused(f"not a readable pickle: {type(exc).__name__}: {str(exc)[:160]}") from None
    raise PickleRefused("no STOP: the pickle is cut")


def _pairs(target: dict[Any, Any], items: list[Any]) -> dict[Any, Any]:
    if len(items) % 2:
        raise PickleRefused("a dict with an odd number of items")
    for i in range(0, len(items), 2):
        target[_key(items[i])] = _check(items[i + 1])
    return target
