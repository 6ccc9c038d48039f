"""The public-report corpus: every fixture names its expected root cause first; healthy logs stay clean.

Fixture files are ``<expected id>__<source>.log`` (``healthy-*`` for logs that must raise no error or
warning). The first line is ``# source: <public report>``; ``# note:`` lines say what the excerpt is;
``# station: NAME`` switches the source, so one file can hold both stations' logs. The excerpts are
trimmed from the reports, never rewritten.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest
from log_excerpts import diagnose, expected, load

from console.diagnosis import SPECS, has_problems

ROOT = Path(__file__).resolve().parents[2]
LOGS = ROOT / "tests" / "fixtures" / "logs"
FILES = sorted(LOGS.glob("*.log"))
FINDINGS_MD = ROOT.parent / "shared" / "reference" / "findings.md"  # ../shared, the stable contract
DOCS_FINDINGS = ROOT / "docs" / "findings.md"  # the ids this repository added since

# every id of shared/reference/findings.md (kept here so the test runs without the shared tree)
CATALOGUE_IDS = {
    "nccl-socket-fallback", "nccl-ib-missing", "nccl-gdr-disabled", "nccl-ib-error", "nccl-connect",
    "nccl-timeout", "nccl-hang", "shm-too-small", "gloo-interface", "cuda-oom", "kv-cache-too-small",
    "free-memory-at-startup", "state-cache-too-small", "smem-kernel-limit", "mtp-weight-mismatch",
    "tool-parser-mismatch", "ray-version-mismatch", "ray-resources", "corrupt-checkpoint", "worker-died",
    "engine-dead", "port-in-use", "gated-dataset",
}
# tool-parser-mismatch is a launch argument (glm45 as GLM-5.x's tool parser) whose failure is silent by
# nature: no public log excerpt exists; tests/unit/test_diagnose.py covers it on the engine's own lines.
NO_PUBLIC_EXCERPT = {"tool-parser-mismatch"}
MIN_EXCERPTS = 3


def docs_ids() -> set[str]:
    return set(re.findall(r"^\| `([a-z0-9-]+)` \|", DOCS_FINDINGS.read_text(), re.M))


def test_catalogue_has_every_id():
    added = docs_ids()
    assert CATALOGUE_IDS <= set(SPECS)
    assert set(SPECS) == CATALOGUE_IDS | added, "every id is in findings.md or docs/findings.md"
    assert not added & CATALOGUE_IDS
    if FINDINGS_MD.is_file():  # cross-check against the reference table when the shared tree is here
        ids = set(re.findall(r"^\| `([a-z0-9-]+)` \|", FINDINGS_MD.read_text(), re.M))
        assert CATALOGUE_IDS <= ids
        assert set(SPECS) == ids | added


def test_corpus_has_three_real_excerpts_per_id_and_ten_healthy_logs():
    counts = Counter(expected(p) for p in FILES)
    unknown = {k for k in counts if not k.startswith("healthy")} - set(SPECS)
    assert not unknown, f"fixtures named after no catalogue id: {unknown}"
    for fid in set(SPECS) - NO_PUBLIC_EXCERPT:
        assert counts[fid] >= MIN_EXCERPTS, f"{fid}: {counts[fid]} excerpt(s)"
    healthy = {k: v for k, v in counts.items() if k.startswith("healthy")}
    assert sum(healthy.values()) >= 10
    assert healthy.get("healthy-vllm", 0) >= 2 and healthy.get("healthy-sglang", 0) >= 2
    assert healthy.get("healthy-nccl", 0) >= 2


@pytest.mark.parametrize("path", [p for p in FILES if not expected(p).startswith("healthy")], ids=lambda p: p.name)
def test_fixture_yields_expected_id_first(path: Path):
    findings = diagnose(path)
    assert findings, "no finding"
    assert findings[0].id == expected(path), [(f.id, f.severity) for f in findings]
    top = findings[0]
    assert top.evidence and top.evidence[0].line >= 1
    assert top.cause and top.fix and top.station in load(path)


@pytest.mark.parametrize("path", [p for p in FILES if expected(p).startswith("healthy")], ids=lambda p: p.name)
def test_healthy_log_has_no_error_or_warning(path: Path):
    findings = diagnose(path)
    assert not has_problems(findings), [(f.id, f.severity, f.evidence[0].text) for f in findings]


def test_evidence_line_numbers_point_at_the_matching_line():
    path = LOGS / "nccl-connect__nccl-1105.log"
    lines = load(path)[path.name]
    top = diagnose(path)[0]
    ev = top.evidence[0]
    assert lines[ev.line - 1].endswith(ev.text.split("] ", 1)[-1])
    assert "No route to host" in ev.text
