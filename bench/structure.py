"""The shape of the code, as figures: lines per module, modules over the limit, import cycles.

No module should grow past ~600 lines and the package should have no import cycles, not even
through type-only imports; this prints both so a change can be compared before and after (``duplicates`` gives the
repeated-code pairs). Imports are read from the source (``ast``), module level only: an import
inside a function is a deliberate late import, not a cycle at load time, and is counted apart.

    python bench/structure.py [--root console] [--limit 600] [--top 15]
"""

from __future__ import annotations

import argparse
import ast
import statistics
import sys
from pathlib import Path


def module_name(root: Path, path: Path) -> str:
    rel = path.relative_to(root.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(tree: ast.Module, name: str, is_pkg: bool) -> tuple[set[str], set[str], set[str]]:
    """(module-level imports, imports inside functions, imports under ``TYPE_CHECKING``) as
    absolute module names: a type-only import is no cycle at load time, but it is one in the design."""
    top: set[str] = set()
    late: set[str] = set()
    typed: set[str] = set()

    def resolve(node: ast.ImportFrom) -> list[str]:
        base = node.module or ""
        if node.level:
            pkg = name.split(".") if is_pkg else name.split(".")[:-1]
            pkg = pkg[: len(pkg) - (node.level - 1)]
            base = ".".join(pkg + ([base] if base else []))
        return [base] + [f"{base}.{a.name}" for a in node.names]

    def walk(node: ast.AST, in_func: bool, in_typecheck: bool) -> None:
        for child in ast.iter_child_nodes(node):
            func = in_func or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef)
            tc = in_typecheck or (isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test))
            names: list[str] = []
            if isinstance(child, ast.Import):
                names = [a.name for a in child.names]
            elif isinstance(child, ast.ImportFrom):
                names = resolve(child)
            if names:
                (typed if tc else late if func else top).update(names)
            walk(child, func, tc)

    walk(tree, False, False)
    return top, late, typed


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]
    sys.setrecursionlimit(10000)

    def strong(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in graph:
        if v not in index:
            strong(v)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", default="console")
    ap.add_argument("--limit", type=int, default=600)
    ap.add_argument("--top", type=int, default=15)
    args = ap.parse_args()
    root = Path(args.root).resolve()
    files = sorted(root.rglob("*.py"))
    lines: dict[str, int] = {}
    graph: dict[str, set[str]] = {}
    every: dict[str, set[str]] = {}
    types: dict[str, set[str]] = {}
    late_edges = 0
    for f in files:
        name = module_name(root, f)
        text = f.read_text()
        lines[name] = len(text.splitlines())
        top, late, typed = imports_of(ast.parse(text), name, f.name == "__init__.py")
        graph[name] = set(top)
        every[name] = top | late
        types[name] = top | typed
        late_edges += len(late)
    known = set(lines)
    for g in (graph, every, types):
        for name, targets in g.items():
            # "from a.b import c": c may be a module or a name in a.b; keep whichever is a module.
            # A package's __init__ importing its own modules is not a cycle worth counting.
            g[name] = {t for t in targets if t in known and t != name and not t.startswith(name + ".")}
    sizes = sorted(lines.values())
    over = sorted(((n, c) for n, c in lines.items() if c > args.limit), key=lambda x: -x[1])
    cyc = cycles(graph)
    cyc_all = cycles(every)
    cyc_types = cycles(types)
    top_level = sorted(p.name for p in root.iterdir() if p.suffix == ".py" and p.name != "__init__.py")
    basenames: dict[str, list[str]] = {}
    for n in lines:
        basenames.setdefault(n.rsplit(".", 1)[-1], []).append(n)
    same = {b: ns for b, ns in basenames.items() if len(ns) > 1 and b not in ("__init__", "console")}
    print(f"modules: {len(lines)}  lines: {sum(sizes)}  median {statistics.median(sizes):.0f}  max {sizes[-1]}")
    print(f"modules over {args.limit} lines: {len(over)}")
    for n, c in over:
        print(f"  {c:5d}  {n}")
    print(f"top-level modules in {root.name}/: {len(top_level)} ({', '.join(top_level)})")
    print(f"import cycles (module level): {len(cyc)}")
    for c in cyc:
        print("  " + " <-> ".join(c))
    print(f"import cycles (late imports included): {len(cyc_all)}")
    for c in cyc_all:
        print("  " + " <-> ".join(c))
    print(f"import cycles (type level, TYPE_CHECKING included): {len(cyc_types)}")
    for c in cyc_types:
        print("  " + " <-> ".join(c))
    print(f"late (in-function) imports: {late_edges}")
    dup_names = {b: ns for b, ns in same.items() if b == "commands"}
    print(f"modules named 'commands': {len(dup_names.get('commands', []))} ({', '.join(dup_names.get('commands', []))})")
    print(f"largest {args.top}:")
    for n, c in sorted(lines.items(), key=lambda x: -x[1])[: args.top]:
        print(f"  {c:5d}  {n}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
