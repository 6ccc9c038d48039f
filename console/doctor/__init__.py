"""The NCCL troubleshooting workbench: a ladder of rungs from "reach and links" to "relaunch with
NCCL debug", shared by ``dgx-console doctor`` and the workbench screen (key ``n``)."""

from console.doctor.context import DoctorContext, DoctorOptions, RelaunchPlan
from console.doctor.model import DoctorReport, Rung, RungResult
from console.doctor.runner import RUNG_IDS, RUNGS, run_doctor, select

__all__ = ["RUNGS", "RUNG_IDS", "DoctorContext", "DoctorOptions", "DoctorReport", "RelaunchPlan", "Rung",
           "RungResult", "run_doctor", "select"]
