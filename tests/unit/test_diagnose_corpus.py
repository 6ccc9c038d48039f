"""The public-report corpus: every fixture names its expected root cause first; healthy logs stay clean."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

from console.diagnose import SPECS, diagnose_lines, has_problems

LOGS = Path(__file__).resolve().parent.parent / "fixtures" / "logs"
FILES = sorted(LOGS.glob("*.log"))
FINDINGS_MD = Path(__file__).resolve().parents[3] / "shared" / "reference" / "findings.md"  # ../shared

# every id of shared/reference/findings.md (kept here so the test runs without the shared tree)
CATALOGUE_IDS = {
    "nccl-socket-fallback", "nccl-ib-missing", "nccl-gdr-disabled", "nccl-ib-error", "nccl-connect",
    "nccl-timeout", "nccl-hang", "shm-too-small", "gloo-interface", "cuda-oom", "kv-cache-too-small",
    "free-memory-at-startup", "state-cache-too-small", "smem-kernel-limit", "mtp-weight-mismatch",
    "tool-parser-mismatch", "ray-version-mismatch", "ray-resources", "corrupt-checkpoint", "worker-died",
    "engine-dead", "port-in-use", "gated-dataset",
}
# ids without a public log excerpt (see the report): tool-parser-mismatch; one only: mtp-weight-mismatch
SINGLE_OR_NONE = {"tool-parser-mismatch", "mtp-weight-mismatch"}


def load(path: Path) -> list[str]:
    lines = path.read_text().splitlines()
    assert lines[0].startswith("# source: https://github.com/"), f"{path.name} lacks its source link"
    return [x for x in lines if not x.startswith(("# source:", "# note:"))]


def expected(path: Path) -> str:
    return path.name.split("__", 1)[0]


def test_catalogue_has_every_id():
    assert set(SPECS) == CATALOGUE_IDS
    if FINDINGS_MD.is_file():  # cross-check against the reference table when the shared tree is here
        ids = set(re.findall(r"^\| `([a-z0-9-]+)` \|", FINDINGS_MD.read_text(), re.M))
        assert ids == CATALOGUE_IDS


def test_corpus_has_two_real_excerpts_per_id():
    counts = Counter(expected(p) for p in FILES)
    for fid in CATALOGUE_IDS - SINGLE_OR_NONE:
        assert counts[fid] >= 2, f"{fid}: {counts[fid]} excerpt(s)"
    assert sum(v for k, v in counts.items() if k.startswith("healthy-vllm")) >= 2
    assert sum(v for k, v in counts.items() if k.startswith("healthy-sglang")) >= 2


@pytest.mark.parametrize("path", [p for p in FILES if not expected(p).startswith("healthy")], ids=lambda p: p.name)
def test_fixture_yields_expected_id_first(path: Path):
    findings = diagnose_lines(path.name, load(path))
    assert findings, "no finding"
    assert findings[0].id == expected(path), [f.id for f in findings]
    top = findings[0]
    assert top.evidence and top.evidence[0].line >= 1
    assert top.cause and top.fix and top.station == path.name


@pytest.mark.parametrize("path", [p for p in FILES if expected(p).startswith("healthy")], ids=lambda p: p.name)
def test_healthy_log_has_no_error_or_warning(path: Path):
    findings = diagnose_lines(path.name, load(path))
    assert not has_problems(findings), [(f.id, f.severity, f.evidence[0].text) for f in findings]


def test_evidence_line_numbers_point_at_the_matching_line():
    path = LOGS / "nccl-connect__nccl-1105.log"
    lines = load(path)
    top = diagnose_lines(path.name, lines)[0]
    ev = top.evidence[0]
    assert lines[ev.line - 1].endswith(ev.text.split("] ", 1)[-1])
    assert "No route to host" in ev.text
