"""The NCCL troubleshooting workbench: a ladder of rungs from "reach and links" to "relaunch with
NCCL debug", shared by ``dgx-console doctor`` and the workbench screen (key ``n``). Its names load on
first use (``console.lazy.lazy_exports``): the dashboard's banner needs ``next_steps`` alone before the
first frame, not every rung."""

from console.lazy import lazy_exports

__getattr__, __all__ = lazy_exports(__name__, {
    "context": ("DoctorContext", "DoctorOptions", "RelaunchPlan"),
    "model": ("DoctorReport", "Rung", "RungResult"),
    "runner": ("RUNG_IDS", "RUNGS", "run_doctor", "select"),
})
