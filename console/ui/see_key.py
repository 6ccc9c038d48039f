"""What you see -> which key: the one table F1 shows under the keys and the README prints (a test keeps
the README's copy equal to this one). Each row: a thing the dashboard shows, the key that takes the
operator to what explains it or does the next step. Pure data."""

from __future__ import annotations

ROWS: tuple[tuple[str, str], ...] = (
    ("⚠ WEDGED / STUCK / OUT-OF-STEP banner", "h: hang evidence (s there keeps it), then R"),
    ("engine failed, a ✖ fatal line", "d: diagnosis (cause, fix), then L or R"),
    ("diagnosis: ✖ N errors (d)", "d: the findings; Enter: the log line"),
    ("a GPU row ✖, an Xid, a red health box", "k: checks (gpu-errors, gpu-health)"),
    ("rail ▼ down, flaps, err/s", "k: checks (rail-live); n: NCCL workbench"),
    ("NCCL TCP socket, not RDMA", "n: NCCL workbench (the ladder)"),
    ("API ● not answering / 503", "d: diagnosis; c: a chat test"),
    ("slow tokens, requests waiting", "i: investigate; b: bench"),
    ("GPU memory held, nothing serving", "P: process list (end a leftover)"),
    ("stale / unreachable station", "f: fleet (why, per source)"),
    ("waiting for an SSH channel", "nothing: the job starts when one frees"),
)


def markdown() -> str:
    """The table as the README prints it."""
    rows = ["| what you see | which key |", "|---|---|"]
    rows += [f"| {see} | {key} |" for see, key in ROWS]
    return "\n".join(rows)
