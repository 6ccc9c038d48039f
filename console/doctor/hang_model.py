"""The typed hang-evidence model shared by ``hang-report``, the evidence screen (``h``) and the
doctor's verdict: how many reads of a source came back (never one read judged as two), the time
measured between them, and which stations a finding covers."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Generic, Literal, TypeVar

T = TypeVar("T")

ReadCount = Literal["not-read", "one-read", "two-reads"]


@dataclass
class TwoReads(Generic[T]):
    """A source read twice ``interval`` apart (RAS, RDMA/NIC counters, GPUs): what each read gave,
    when (monotonic seconds at the middle of the read) and why a read is missing."""

    first: T | None = None
    second: T | None = None
    first_at: float | None = None
    second_at: float | None = None
    why_not: str | None = None  # why a read is missing (timed out, cut by the deadline, failed)

    @property
    def state(self) -> ReadCount:
        n = (self.first is not None) + (self.second is not None)
        return ("not-read", "one-read", "two-reads")[n]  # type: ignore[return-value]

    @property
    def elapsed_s(self) -> float | None:
        """The measured time between the two reads (None unless both came back)."""
        if self.state != "two-reads" or self.first_at is None or self.second_at is None:
            return None
        return max(0.0, self.second_at - self.first_at)

    def only(self) -> T | None:
        """The one read there is (first, else second)."""
        return self.first if self.first is not None else self.second


@dataclass(frozen=True)
class Finding:
    """One line over one kind of evidence, and the stations it speaks for (a station whose source
    was not read is not covered: "clean" is said only of what was read)."""

    key: str  # ras | flight_recorder | pyspy | counters | gpus | kernel
    text: str
    stations: tuple[str, ...] = ()
    not_read: tuple[str, ...] = field(default=())
