"""A real HTTP receiver on 127.0.0.1 for the alert tests (http.server in a thread): it keeps every
request (method, path, headers, body) and answers from a script of statuses, or hangs (accepts the
request and never answers until it is closed)."""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HANG = -1


@dataclass
class Received:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> dict:
        return json.loads(self.body)


class Receiver:
    """``Receiver(statuses=[503, 200])``: the answers in order, the last one repeated; ``HANG``: no
    answer (the connection is held open until ``close``). An answer may be ``(status, headers)``
    (``(429, {"Retry-After": "2"})``). ``got_at``: when each request came (monotonic)."""

    def __init__(self, statuses: list[int | tuple[int, dict[str, str]]] | None = None) -> None:
        self.statuses = list(statuses or [200])
        self.got: list[Received] = []
        self.got_at: list[float] = []
        self._lock = threading.Lock()
        self._closing = threading.Event()
        rec = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n)
                with rec._lock:
                    rec.got.append(Received("POST", self.path, {k: v for k, v in self.headers.items()}, body))
                    rec.got_at.append(time.monotonic())
                    answer = rec.statuses.pop(0) if len(rec.statuses) > 1 else rec.statuses[0]
                status, headers = answer if isinstance(answer, tuple) else (answer, {})
                if status == HANG:
                    rec._closing.wait(30)
                    return
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self._closing.set()
        self.server.shutdown()
        self.server.server_close()

    def __enter__(self) -> Receiver:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
