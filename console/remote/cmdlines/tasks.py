"""The engine threads' kernel-side state for the hang evidence (re-exported by
``console.remote.cmdlines``, their one home; parsed by ``console/probes/proc_tasks.py``)."""

from __future__ import annotations

import shlex

q = shlex.quote

PROC = "/proc"
TASKS_MAX = 512  # threads read per process (a vLLM worker has a few hundred)
STACK_LINES = 24
TASKS_LIMIT_S = 30  # the whole read, killed station-side after this


def engine_tasks(container: str, pattern: str, limit_s: int = TASKS_LIMIT_S) -> str:
    """Per engine process of the container (host PIDs from ``docker top``, the processes matching
    ``pattern``): every thread's ``stat`` line, ``wchan`` and kernel ``stack`` (``stack-error`` and
    the reader's message where it cannot be read: root only on most kernels). Shell builtins read
    ``stat`` and ``wchan`` (no process per thread); bounded to ``TASKS_MAX`` threads a process
    (``MORE-TASKS``) and ``limit_s`` in all."""
    script = (
        f"c={q(container)}; P={PROC}; "
        'out=$(docker top "$c" -eo pid,args 2>&1) || { printf "%s\\n" "$out"; exit 3; }; '
        'printf "%s\\n" "$out" | { found=0; while read -r pid args; do '
        f'case "$args" in {pattern}) ;; *) continue;; esac; '
        "case \"$pid\" in ''|*[!0-9]*) continue;; esac; found=1; "
        'echo "=== PID $pid: $args"; '
        'if [ ! -d "$P/$pid/task" ]; then echo "NO-TASKS no task directory for pid $pid (it ended, or another '
        'pid namespace)"; continue; fi; n=0; '
        'for t in "$P/$pid"/task/*; do n=$((n+1)); '
        f'if [ "$n" -gt {TASKS_MAX} ]; then echo MORE-TASKS; break; fi; '
        's=; w=; { IFS= read -r s < "$t/stat"; } 2>/dev/null; { IFS= read -r w < "$t/wchan"; } 2>/dev/null; '
        'echo "--- TID ${t##*/}"; echo "stat ${s:-?}"; echo "wchan ${w:-?}"; '
        f'if k=$(head -n {STACK_LINES} "$t/stack" 2>&1); then echo stack; [ -z "$k" ] || printf "%s\\n" "$k"; '
        'else echo "stack-error $(printf "%s\\n" "$k" | tail -n 1)"; fi; '
        'done; done; [ "$found" = 1 ] || echo "NO-ENGINE-PROCESS"; }'
    )
    return f"timeout -s KILL {int(limit_s)} sh -c {q(script)}"
