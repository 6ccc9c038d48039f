"""StationState on its own (no app, no I/O): every message folded in, the aspects it reports, the
connection states the pane shows, GB10's unified-memory arithmetic, the GPU history, the derived
words, and the Stations collection."""

from __future__ import annotations

import pytest

from console.probes.docker import ContainerInfo
from console.probes.engine_log import EngineProgress
from console.probes.meminfo import HostMemory
from console.probes.nvidia_smi import ComputeApp, GpuReading
from console.station.aspects import Aspect
from console.station.gpu_memory import HISTORY, GpuMemory
from console.station.messages import (
    AppsSample,
    ConnectionState,
    ContainerUpdate,
    EngineUpdate,
    GpuSample,
    HostMemSample,
    LogBatch,
)
from console.station.state import Stations, StationState
from console.vocabulary import ConnState

A = Aspect


def gb300(used: int = 236902, util: int = 40) -> list[GpuReading]:
    return [GpuReading(0, "GPU-d0", "NVIDIA RTX PRO 6000 Blackwell Workstation Edition", 1184, 97887, 1, 31, 22.5),
            GpuReading(1, "GPU-s1", "NVIDIA GB300", used, 256703, util, 48, 310.0)]


def gb10(util: int = 0) -> list[GpuReading]:
    return [GpuReading(0, "GPU-x", "NVIDIA GB10", None, None, util, 35, 11.2)]


class FakeHostKey:
    fingerprint = "SHA256:abc"


# ---------------------------------------------------------------------- connection


@pytest.mark.parametrize(("state", "down", "pending", "not_live", "readable"), [
    (ConnState.CONNECTING, False, False, False, True),
    (ConnState.LIVE, False, False, False, True),
    (ConnState.STALE, False, False, True, True),
    (ConnState.UNREACHABLE, True, False, True, False),
    (ConnState.HOST_KEY_UNKNOWN, True, True, True, False),
    (ConnState.HOST_KEY_CHANGED, True, True, True, False),
    (ConnState.ERROR, True, False, True, False),
])
def test_every_connection_state_and_its_groups(state, down, pending, not_live, readable):
    s = StationState("A")
    hk = FakeHostKey() if pending else None
    assert s.apply(ConnectionState("A", state, "why", next_try_at=5.0, host_key=hk)) == {A.CONN}
    c = s.conn
    assert (c.state, c.detail, c.next_try_at, c.host_key) == (state, "why", 5.0, hk)
    assert (c.down, c.host_key_pending, c.not_live, c.logs_readable) == (down, pending, not_live, readable)
    assert c.live is (state == ConnState.LIVE)
    assert c.fingerprint == ("SHA256:abc" if pending else None)


def test_a_fresh_station_is_connecting_and_has_no_age():
    s = StationState("A")
    assert s.conn.state == "connecting" and s.conn.logs_readable and not s.conn.down
    assert s.sample_age(100.0) is None and s.seen_at is None and not s.values_stale
    assert s.gpus == [] and s.memory == {} and s.engine_label == "" and not s.engine_shown


def test_connection_walk_keeps_the_last_sample_time_and_reports_only_changes():
    s = StationState("B")
    assert s.apply(ConnectionState("B", "live", last_sample_at=100.0)) == {A.CONN}
    assert s.apply(ConnectionState("B", "live", last_sample_at=100.0)) == set()  # nothing moved
    assert not s.values_stale
    s.apply(ConnectionState("B", "stale", "no sample for 4 s", last_sample_at=96.0))
    assert s.values_stale and s.conn.last_sample_at == 96.0
    # a state without a sample time keeps the last one (the age of what is on screen)
    s.apply(ConnectionState("B", "unreachable", "declared dead", next_try_at=110.0))
    assert s.conn.last_sample_at == 96.0 and s.values_stale and s.conn.down
    assert s.conn.next_try_at == 110.0
    s.apply(ConnectionState("B", "error", "RuntimeError: boom"))
    assert s.conn.next_try_at is None and s.conn.detail == "RuntimeError: boom"
    s.apply(ConnectionState("B", "connecting", "10.0.0.2"))
    assert s.values_stale  # values from before stay, dimmed, until live again
    s.apply(ConnectionState("B", "live", last_sample_at=120.0))
    assert not s.values_stale and s.conn.detail == ""


# ---------------------------------------------------------------------- GPUs and memory


def test_gpu_sample_sets_readings_memory_and_history_with_its_own_time():
    s = StationState("A")
    assert s.apply(GpuSample("A", gb300(100000), 10.0)) == {A.GPUS, A.MEMORY}
    assert s.gpus_at == 10.0 and s.at[A.GPUS] == 10.0 and s.sample_age(12.5) == 2.5
    assert s.memory[1] == GpuMemory(100000, 256703) and not s.memory[1].unified and s.memory[1].note == ""
    assert s.memory[1].frac == pytest.approx(100000 / 256703)
    s.apply(GpuSample("A", gb300(120000, 55), 11.0))
    assert list(s.traces[1].times) == [10.0, 11.0] and list(s.traces[1].used) == [100000, 120000]
    assert list(s.traces[1].utils) == [40, 55]
    assert [g.index for g in s.serving_gpus("NVIDIA GB300")] == [1]
    assert [g.index for g in s.serving_gpus("NVIDIA H100")] == [0, 1]  # none is that one: all of them
    assert [g.index for g in s.serving_gpus(None)] == [0, 1]


def test_nvidia_smi_failing_keeps_the_last_readings_and_says_why():
    s = StationState("A")
    s.apply(GpuSample("A", gb300(100000), 10.0))
    assert s.apply(GpuSample("A", [], 11.0, error="NVML: Driver/library version mismatch")) == {A.GPUS}
    assert s.gpus == gb300(100000) and s.gpus_at == 10.0 and s.gpu_error.startswith("NVML")
    assert s.sample_age(11.0) == 0.0  # the source answered (with an error)
    assert s.seen_at == 10.0  # the readings on screen are from 10.0
    assert len(s.traces[1].times) == 1
    s.apply(GpuSample("A", gb300(110000), 12.0))
    assert s.gpu_error is None and s.gpus_at == 12.0


def test_history_restarts_when_the_gpus_are_other_gpus_and_is_bounded():
    s = StationState("A")
    for k in range(HISTORY + 5):
        s.apply(GpuSample("A", gb300(1000 + k), float(k)))
    assert len(s.traces[1].times) == HISTORY and s.traces[1].times[-1] == HISTORY + 4
    s.apply(GpuSample("A", gb300()[1:], 500.0))  # the display GPU is gone: other GPUs
    assert list(s.traces) == [1] and list(s.traces[1].times) == [500.0]


def test_a_gpu_that_cannot_be_read_has_no_memory_and_no_history():
    lost = GpuReading(0, "", "", None, None, None, None, None, error="Unable to determine the device handle",
                      bus_id="00000000:01:00.0")
    s = StationState("A")
    s.apply(GpuSample("A", [lost, gb300()[1]], 1.0))
    assert s.memory[0] == GpuMemory(None, None) and 0 not in s.traces
    assert s.memory[1].used_mib == 236902 and 1 in s.traces
    assert s.unified_gpus == []  # a GPU without a name is not "unified", it is unread


def test_gb10_unified_memory_is_its_processes_against_the_hosts_memory():
    s = StationState("A")
    assert s.apply(GpuSample("A", gb10(), 1.0)) == {A.GPUS, A.MEMORY}
    assert s.memory[0] == GpuMemory(0.0, None, unified=True) and s.memory[0].note == "unified"
    assert s.unified_gpus == gb10()
    assert s.apply(HostMemSample("A", HostMemory(123904, 20000), 1.5)) == {A.HOSTMEM, A.MEMORY}
    assert s.memory[0] == GpuMemory(0.0, 123904, unified=True)
    apps = [ComputeApp("GPU-x", 114687, "python", 92672), ComputeApp("GPU-x", 2, "idle", None),
            ComputeApp("GPU-x", 3, "nvtop", 0), ComputeApp("GPU-other", 4, "elsewhere", 5000)]
    assert s.apply(AppsSample("A", apps, 2.0)) == {A.APPS, A.MEMORY}
    assert s.apps_seen and s.process_memory_mib("GPU-x") == 92672
    mem = s.memory[0]
    assert mem.used_mib == 92672.0 and isinstance(mem.used_mib, float) and mem.total_mib == 123904
    assert f"{mem.used_mib / 1024:.1f}/{mem.total_mib / 1024:.1f}" == "90.5/121.0"  # the pane's figures
    # the same sample drawn again with the processes: its history entry is replaced, not added
    assert list(s.traces[0].times) == [1.0] and list(s.traces[0].used) == [92672.0]


def test_host_memory_redraws_no_gpu_that_reports_its_own_memory():
    s = StationState("A")
    s.apply(GpuSample("A", gb300(), 1.0))
    assert s.apply(HostMemSample("A", HostMemory(507904, 482000), 1.0)) == {A.HOSTMEM}
    assert s.memory[1].total_mib == 256703 and s.at[A.HOSTMEM] == 1.0


def test_failed_readings_keep_the_last_values_and_record_the_error():
    s = StationState("A")
    s.apply(HostMemSample("A", HostMemory(1000, 400), 1.0))
    assert s.apply(HostMemSample("A", None, 2.0, error="meminfo: no MemTotal")) == {A.HOSTMEM}
    assert s.host_mem == HostMemory(1000, 400) and s.host_mem_error == "meminfo: no MemTotal"
    s.apply(HostMemSample("A", HostMemory(1000, 300), 3.0))
    assert s.host_mem_error is None and s.host_mem.used_mib == 700
    s.apply(AppsSample("A", [ComputeApp("GPU-x", 1, "p", 10)], 1.0))
    assert s.apply(AppsSample("A", [], 2.0, error="nvidia-smi: failed")) == {A.APPS}
    assert s.apps == [ComputeApp("GPU-x", 1, "p", 10)] and s.apps_error == "nvidia-smi: failed"


# ---------------------------------------------------------------------- container, engine, logs


def test_engine_line_shows_while_the_container_runs_or_when_it_failed():
    s = StationState("B", rank=1, head=False, container="glm53")
    s.apply(EngineUpdate("B", EngineProgress("ready"), at=5.0))
    assert s.engine_shown and s.engine_label == "serving (worker)" and s.at[A.ENGINE] == 5.0
    assert s.apply(ContainerUpdate("B", ContainerInfo("glm53", "exited", exit_code=0), at=6.0)) == {
        A.CONTAINER, A.ENGINE}  # its engine stopped with it
    assert not s.engine_shown and s.at[A.CONTAINER] == 6.0 and s.engine.phase == "stopped"
    s.apply(EngineUpdate("B", EngineProgress("failed", fatal="torch.OutOfMemoryError")))
    assert s.engine_shown and s.engine_failed and s.engine_label == "failed"
    head = StationState("A", head=True)
    head.apply(EngineUpdate("A", EngineProgress("loading", load_pct=30)))
    assert head.engine_label == "loading weights 30%" and head.engine_shown  # no container known yet
    head.apply(EngineUpdate("A", EngineProgress("ready")))
    assert head.engine_label == "ready"


@pytest.mark.parametrize("container", ["created", "exited", "dead", "absent"])
@pytest.mark.parametrize("read", ["starting", "loading", "kv-cache", "ready"])
def test_an_engine_whose_container_does_not_run_is_stopped_in_every_reader(container, read):
    """A created-but-never-started container was "starting" to ``status`` (its empty log)
    and "stopped" to ``watch``. One state, one word: the log's last phase and the container together."""
    from console.station.snapshot import status_dict, watch_json

    for order in ("container first", "engine first"):
        s = StationState("A", head=True, container="glm53")
        msgs = [ContainerUpdate("A", ContainerInfo("glm53", container), at=1.0),
                EngineUpdate("A", EngineProgress(read, load_pct=40 if read == "loading" else None), at=1.0)]
        for m in (msgs if order == "container first" else msgs[::-1]):
            s.apply(m)
        assert s.engine.phase == "stopped" and s.engine_read.phase == read, order
        assert watch_json(s, 2.0)["engine"]["phase"] == "stopped"
        assert status_dict(s)["engine"]["phase"] == "stopped" and s.engine_label == "stopped"
        # it starts: the log's word again
        s.apply(ContainerUpdate("A", ContainerInfo("glm53", "running"), at=3.0))
        assert s.engine.phase == read


def test_a_failure_stays_a_failure_when_the_container_exits():
    s = StationState("A", container="glm53")
    s.apply(EngineUpdate("A", EngineProgress("failed", fatal="torch.OutOfMemoryError"), at=1.0))
    s.apply(ContainerUpdate("A", ContainerInfo("glm53", "exited", exit_code=1), at=2.0))
    assert s.engine.phase == "failed" and s.engine.fatal == "torch.OutOfMemoryError"


def test_a_log_batch_moves_only_the_log_sources_time():
    s = StationState("A")
    assert s.apply(LogBatch("A", ["x"], at=7.0)) == {A.LOGS}
    assert s.at == {A.LOGS: 7.0} and s.age(A.LOGS, 9.0) == 2.0 and s.age(A.GPUS, 9.0) is None


def test_the_station_keeps_its_log_bounded_and_numbered_over_every_line(tmp_path):
    """The state owns the log (the view renders it, the diagnosis numbers lines by it): the
    config's ``ui.log_lines`` bounds it, numbers go on over the lines dropped."""
    from console.config import parse_config

    cfg = parse_config('[ui]\nlog_lines = 100\n[[stations]]\nname = "A"\nhost = "h0"\nrank = 0\n', "x.toml")
    s = Stations.for_config(cfg)["A"]
    s.apply(LogBatch("A", [f"l{i}" for i in range(1, 131)], at=1.0))
    s.apply(LogBatch("A", ["last"], at=2.0))
    assert (s.log.total, s.log.first, len(s.log)) == (131, 32, 100)
    assert s.log.line(32) == "l32" and s.log.line(131) == "last"


def test_the_apis_poll_is_the_heads_source():
    from console.serving.metrics import ServingSnapshot
    from console.station.messages import ServingUpdate

    sts = Stations([StationState("A", rank=0), StationState("B", rank=1, head=False)])
    snap = ServingSnapshot(url="http://127.0.0.1:8000", status="ok", polled_at=3.0)
    assert sts.apply(ServingUpdate(snap, at=3.5)) == {A.SERVING}
    assert sts["A"].serving is snap and sts["A"].age(A.SERVING, 4.0) == 0.5 and sts["B"].serving is None


def test_other_messages_change_nothing():
    s = StationState("A")
    assert s.apply(object()) == set()


def test_seen_at_is_the_newest_of_the_connections_word_and_the_gpu_readings():
    s = StationState("A")
    s.apply(ConnectionState("A", "live", last_sample_at=70.0))
    s.apply(GpuSample("A", gb300(), 99.0))
    assert s.seen_at == 99.0
    s.apply(ConnectionState("A", "stale", last_sample_at=100.0))
    assert s.seen_at == 100.0


# ---------------------------------------------------------------------- the collection


class _Station:
    def __init__(self, name, rank, container="glm53"):
        self.name, self.rank, self.container = name, rank, container

    @property
    def is_head(self):
        return self.rank == 0


def test_stations_route_messages_and_say_whose_log_cannot_be_read():
    sts = Stations([StationState.for_station(_Station("B", 1)), StationState.for_station(_Station("A", 0))])
    assert list(sts) == ["B", "A"] and [s.name for s in sts.by_rank()] == ["A", "B"]
    assert sts.head is sts["A"] and sts["A"].head and not sts["B"].head
    assert sts["B"].container_name == "glm53" and sts["B"].rank == 1
    assert sts.apply(GpuSample("Z", gb300(), 1.0)) == set()  # a station not configured
    assert sts.apply(EngineUpdate("A", EngineProgress("graphs"))) == {A.ENGINE}
    assert sts.head_engine.phase == "graphs"
    assert sts.unreadable_logs() == {}
    sts.apply(ConnectionState("B", "unreachable", "no answer"))
    sts.apply(ConnectionState("A", "host-key-changed", "changed"))
    assert sts.unreadable_logs() == {"B": "unreachable", "A": "host-key-changed"}
    sts.apply(ConnectionState("B", "stale"))
    assert sts.unreadable_logs() == {"A": "host-key-changed"}


def test_stations_for_a_config_take_the_configs_head(tmp_path):
    from console.config import parse_config

    cfg = parse_config('[[stations]]\nname = "W"\nhost = "h1"\nrank = 1\n'
                       '[[stations]]\nname = "H"\nhost = "h0"\nrank = 0\ncontainer = "c0"\n', "x.toml")
    sts = Stations.for_config(cfg)
    assert sts.head_name == "H" and sts["H"].container_name == "c0" and sts.head_engine is None


# ---------------------------------------------------------------------- every source its own age


def test_a_late_source_is_stale_by_its_own_age_whatever_the_others_do():
    s = StationState("A", gpu_interval_s=1.0)
    s.apply(ConnectionState("A", "live", last_sample_at=10.0))
    s.apply(GpuSample("A", gb300(), 10.0))
    s.apply(HostMemSample("A", HostMemory(507904, 400000), 10.0))
    s.apply(ContainerUpdate("A", ContainerInfo("glm53", "running"), at=1.0))
    assert s.stale_sources(12.0) == []  # the container said nothing new: event-driven, not late
    # host memory stops while the GPU samples come: host memory alone is stale (the station stays live)
    s.apply(GpuSample("A", gb300(), 17.0))
    assert s.conn.live and s.stale(A.HOSTMEM, 17.0) and not s.stale(A.GPUS, 17.0)
    assert s.stale_sources(17.0) == [A.HOSTMEM] and s.value_age(A.HOSTMEM, 17.0) == 7.0
    # the GPU samples stop while the rest answers: the monitor names them; only they (and memory) are old
    s.apply(HostMemSample("A", HostMemory(507904, 400000), 29.0))
    assert s.apply(ConnectionState("A", "stale", "nvidia-smi not answering; SSH fine", last_sample_at=29.0,
                                   late="gpus")) == {A.CONN}
    assert s.conn.late == A.GPUS and not s.values_stale
    assert s.stale(A.GPUS, 29.0) and s.stale(A.MEMORY, 29.0) and not s.stale(A.CONTAINER, 29.0)
    assert not s.stale(A.HOSTMEM, 29.0)
    assert s.why(29.0) == "GPU samples stale 12 s: nvidia-smi not answering; SSH fine"
    assert s.value_age(A.GPUS, 29.0) == 12.0
    # back: live, nothing named
    s.apply(GpuSample("A", gb300(), 30.0))
    s.apply(ConnectionState("A", "live", last_sample_at=30.0))
    assert s.conn.late is None and s.why(30.0) is None and s.stale_sources(30.0) == []


@pytest.mark.parametrize("interval", [1.0, 5.0, 10.0])
def test_a_read_older_than_its_interval_and_2_s_is_never_shown_as_current(interval):
    """Mid-session, whatever the interval: a source read longer ago than its interval + 2 s is stale in
    the state every snapshot reads (``stale_sources``, ``watch --json``), and one read within its
    interval is current."""
    s = StationState("A", gpu_interval_s=interval)
    s.apply(ConnectionState("A", "live", last_sample_at=100.0))
    s.apply(GpuSample("A", gb300(), 100.0))
    s.apply(HostMemSample("A", HostMemory(507904, 400000), 100.0))
    assert s.stale_sources(100.0 + min(interval, 2.0)) == []
    assert A.GPUS in s.stale_sources(100.0 + interval + 2.01) and A.HOSTMEM in s.stale_sources(104.01)
    assert s.stale(A.MEMORY, 100.0 + interval + 2.01)


def test_a_silent_or_down_station_makes_every_value_stale_with_the_connections_age():
    s = StationState("A")
    s.apply(GpuSample("A", gb300(), 10.0))
    s.apply(ContainerUpdate("A", ContainerInfo("glm53", "running"), at=1.0))
    s.apply(ConnectionState("A", "unreachable", "no answer", last_sample_at=10.0))
    assert s.values_stale and s.stale(A.CONTAINER, 40.0) and s.stale(A.ENGINE, 40.0) and s.stale(A.GPUS, 40.0)
    assert s.value_age(A.CONTAINER, 40.0) == 30.0 and s.why(40.0) == "no answer"


def test_gpu_readings_under_a_tool_error_are_stale_with_their_age():
    s = StationState("A")
    s.apply(ConnectionState("A", "live", last_sample_at=10.0))
    s.apply(GpuSample("A", gb300(), 10.0))
    s.apply(GpuSample("A", [], 14.0, error="nvidia-smi: Failed to initialize NVML: Driver/library version mismatch"))
    assert s.conn.live and s.stale(A.GPUS, 14.5) and s.value_age(A.GPUS, 14.5) == 4.5
    s.apply(GpuSample("A", gb300(), 15.0))
    assert not s.stale(A.GPUS, 15.5)


def test_a_crash_read_at_once_keeps_every_fatal_line():
    """A run that started and died between two looks is read in one batch afterwards: every distinct
    fatal line of it is kept (both ranks' OOM, the engine's death), the first still names the error."""
    from console.probes.engine_log import FATAL_LINES_MAX, EngineLogTracker

    lines = ["(VllmWorker rank=0 pid=412) ERROR 12-01 07:17:08 [multiproc_executor.py:744] WorkerProc failed to start.",
             "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.50 GiB. GPU 0 has a total capacity",
             "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB",
             "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.50 GiB. GPU 0 has a total capacity",
             "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}"]
    t = EngineLogTracker()
    assert t.feed_batch(lines)
    p = t.progress
    assert p.phase == "failed" and p.fatal is not None and p.fatal.startswith("torch.OutOfMemoryError")
    assert p.fatal_lines == (lines[1], lines[2], lines[4])  # the repeated line once
    many = [f"RuntimeError: CUDA out of memory. Tried to allocate {k}.00 GiB" for k in range(20)]
    t.feed_batch(many)
    assert len(p.fatal_lines) == FATAL_LINES_MAX


def test_a_failure_the_head_serves_past_clears_and_a_worker_or_an_older_answer_keeps_it():
    """The engine's word follows what it does: a failure read before the head's API answered healthy
    from its running container is over ("ready", the old fatal line kept only as a note); an answer
    from before the failure, a container that does not run, or a worker (no API of its own) keep it."""
    from console.serving.metrics import ServingSnapshot
    from console.station.messages import ServingUpdate

    def failed_head(container: str = "running") -> StationState:
        s = StationState("A", head=True, container="glm53")
        s.apply(ContainerUpdate("A", ContainerInfo("glm53", container, started_at="t0"), at=1.0))
        s.apply(EngineUpdate("A", EngineProgress("failed", fatal="torch.OutOfMemoryError: CUDA out of memory"),
                             at=10.0))
        return s

    def ok(at: float) -> ServingUpdate:
        return ServingUpdate(ServingSnapshot(url="http://x", status="ok", healthy=True, updated_at=at, polled_at=at),
                             at=at)

    s = failed_head()
    s.apply(ok(9.0))  # answered before the failure was read: proves nothing about after
    assert s.engine.phase == "failed" and s.engine_failed
    assert A.ENGINE in s.apply(ok(12.0))
    assert s.engine.phase == "ready" and not s.engine_failed and s.engine.fatal is None
    assert any("OutOfMemoryError" in n for n in s.engine.notes)
    assert s.engine_read.phase == "failed"  # what the log said stays the log's
    stopped = failed_head("exited")
    stopped.apply(ok(12.0))
    assert stopped.engine.phase == "failed"
    worker = StationState("B", rank=1, head=False, container="glm53")
    worker.apply(ContainerUpdate("B", ContainerInfo("glm53", "running"), at=1.0))
    worker.apply(EngineUpdate("B", EngineProgress("failed", fatal="x"), at=10.0))
    worker.apply(ok(12.0))
    assert worker.engine.phase == "failed"
