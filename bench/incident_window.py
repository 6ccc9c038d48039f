"""The incident window's cost: encoded bytes per hour per station and the ring buffer's memory at N
stations, fed the messages a station sends at the default rates (GPU round 1 Hz, health round 1 Hz,
rails round 1 Hz with 2 rails, the API's poll every 2 s on the head, a log line a second).

    python3 bench/incident_window.py [STATIONS] [GPUS_PER_STATION]
"""

from __future__ import annotations

import sys
import time
import tracemalloc

from console.incidents.window import KEEP_S, Window
from console.probes.gpu_health import GpuHealth
from console.probes.nvidia_smi import GpuReading
from console.probes.rails import RailReading
from console.serving.metrics import ServingSnapshot
from console.station.messages import GpuHealthSample, GpuSample, LogBatch, RailsSample, ServingUpdate

COUNTERS = {"port_xmit_data": 123456789012, "port_rcv_data": 123456789012, "out_of_sequence": 0,
            "packet_seq_err": 0, "local_ack_timeout_err": 0, "rx_bytes": 98765432100, "tx_bytes": 98765432100}


def feed(w: Window, names: list[str], gpus: int, seconds: int, t0: float) -> None:
    for s in range(seconds):
        t = t0 + s
        for i, n in enumerate(names):
            w.note(GpuSample(n, [GpuReading(g, f"GPU-{g}", "NVIDIA GB300", 231000 + s % 7, 284000, 97, 61, 912.5)
                                 for g in range(gpus)], t))
            w.note(GpuHealthSample(n, [GpuHealth(g, sm_mhz=1965, sm_max_mhz=2062, power_w=912.5,
                                                 power_limit_w=1400.0, reasons=0) for g in range(gpus)], t + 0.1))
            w.note(RailsSample(n, {d: RailReading(d, "up", True, 400000, 9000, 2, "ACTIVE",
                                                  {k: v + s for k, v in COUNTERS.items()})
                                   for d in ("enp1s0f0np0", "enp1s0f1np1")}, t + 0.2))
            w.note(LogBatch(n, ["(APIServer pid=1) INFO 12-05 14:00:00 [loggers.py:123] Engine 000: Avg prompt "
                                "throughput: 0.0 tokens/s, Avg generation throughput: 144.9 tokens/s"], at=t + 0.3))
            if i == 0 and s % 2 == 0:
                w.note(ServingUpdate(ServingSnapshot(status="ok", running=4.0, waiting=0.0, gen_tok_s=144.9,
                                                     gen_tokens_total=1000.0 * s, kv_usage=0.03, updated_at=t + 0.4)),
                       head=n)


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 8
    gpus = int(sys.argv[2]) if len(sys.argv) > 2 else 2
    names = [chr(65 + i) for i in range(n)]
    one = Window(keep_s=7200.0, max_bytes=1 << 40)
    feed(one, names[:1], gpus, 3600, 1.8e9)
    per_hour = one.encoded_bytes()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    w = Window()
    t = time.perf_counter()
    feed(w, names, gpus, int(KEEP_S) + 300, 1.8e9)  # past the keep: the ring is full
    cost = (time.perf_counter() - t) / ((KEEP_S + 300) * n * 4.5)
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    span = w.span()
    print(f"window: {per_hour / 1e6:.2f} MB per hour per station (encoded NDJSON, {gpus} GPUs, head's API polls)")
    print(f"ring buffer at {n} stations, {KEEP_S / 60:.0f} min kept: {(after - before) / 1e6:.1f} MB traced "
          f"({w.memory_bytes() / 1e6:.1f} MB by getsizeof, {w.encoded_bytes() / 1e6:.1f} MB encoded); "
          f"span {(span[1] - span[0]) / 60:.1f} min; {cost * 1e6:.0f} us per message")


if __name__ == "__main__":
    main()
