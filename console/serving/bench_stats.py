"""The SLO question of a sweep, as pure functions: percentiles with confidence intervals, service-level
objectives parsed from the command line, goodput, and the one line that says how many users fit.

Confidence intervals are **order-statistic (distribution-free) intervals** at 95 %: for the p-th
percentile of n measured requests, the interval runs from the l-th to the u-th smallest value, with
l and u the tightest ranks for which a Binomial(n, p) count falls in [l, u-1] with probability at
least 0.95 (exact binomial sums, no resampling, so the same records always give the same interval).
It assumes only independent requests from one distribution. When n is too small to bound a side
(the p99 of 40 requests has no upper bound at 95 %), that side is ``None`` -- said, never invented.

SLO names: AIPerf's ``time_to_first_token``, ``inter_token_latency``, ``request_latency`` and vLLM's
``ttft``, ``tpot``, ``e2el``; every value in milliseconds. AIPerf's inter-token latency and vLLM's TPOT
are the same figure, (latency - TTFT) / (output tokens - 1); vLLM's ``itl`` (the gap between two
chunks) is a different one and is not accepted. A request meets the SLO when it succeeded and meets
every objective given (a one-token reply has no inter-token gap: it meets that objective, as in
vLLM's goodput). Goodput is the share of a level's measured requests that meet it (errors count as
missing it), and the same count per second of the level.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

CI_LEVEL = 0.95
CI_METHOD = "order-statistic (distribution-free, exact binomial), 95%"
PERCENTILES = (50, 90, 99)
DEFAULT_SLO_TARGET_PCT = 90.0

SloMetric = Literal["ttft", "itl", "latency"]

#: command-line name -> (metric, the name's origin)
SLO_NAMES: dict[str, tuple[SloMetric, str]] = {
    "time_to_first_token": ("ttft", "AIPerf"),
    "ttft": ("ttft", "vLLM"),
    "inter_token_latency": ("itl", "AIPerf"),
    "tpot": ("itl", "vLLM"),
    "request_latency": ("latency", "AIPerf"),
    "e2el": ("latency", "vLLM"),
}
SLO_WORDS: dict[SloMetric, str] = {"ttft": "TTFT", "itl": "ITL", "latency": "latency"}
SLO_HELP = ("SLO in ms, repeatable: time_to_first_token|ttft, inter_token_latency|tpot (the same figure: "
            "(latency - TTFT) / (tokens - 1); vLLM's itl, a chunk gap, is not it), request_latency|e2el "
            "(AIPerf's names | vLLM's); e.g. --slo ttft:500 e2el:20000")


# ---------------------------------------------------------------- percentiles and their intervals


def percentile(values: Sequence[float], q: float) -> float | None:
    """Linear interpolation between closest ranks (numpy's default, which AIPerf uses)."""
    if not values:
        return None
    xs = sorted(values)
    pos = (len(xs) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)



def _binom_cdf_table(n: int, p: float) -> list[float]:
    """``cdf[k]`` = P(Binomial(n, p) <= k), k = 0..n (log-space pmf: exact enough for n up to 10^6)."""
    if p <= 0.0:
        return [1.0] * (n + 1)
    if p >= 1.0:
        return [0.0] * n + [1.0]
    lp, lq = math.log(p), math.log1p(-p)
    lgn = math.lgamma(n + 1)
    out, acc = [], 0.0
    for k in range(n + 1):
        acc += math.exp(lgn - math.lgamma(k + 1) - math.lgamma(n - k + 1) + k * lp + (n - k) * lq)
        out.append(min(acc, 1.0))
    return out


def percentile_ci(values: Sequence[float], q: float, level: float = CI_LEVEL) -> tuple[float | None, float | None]:
    """The order-statistic interval of the ``q``-th percentile (see the module's words); a side that
    ``len(values)`` cannot bound is None."""
    n = len(values)
    if n == 0:
        return None, None
    xs = sorted(values)
    cdf = _binom_cdf_table(n, q / 100.0)  # cdf[k] = P(B <= k)
    alpha = (1.0 - level) / 2.0
    # [x_(l), x_(u)] covers the percentile with P(l <= B <= u - 1) = cdf[u-1] - cdf[l-1]: the lower rank
    # is the largest l with P(B <= l-1) <= alpha, the upper the smallest u with P(B <= u-1) >= 1 - alpha
    lo = next((j for j in range(n, 0, -1) if cdf[j - 1] <= alpha), None)
    hi = next((j for j in range(1, n + 1) if cdf[j - 1] >= 1.0 - alpha), None)
    return (xs[lo - 1] if lo else None), (xs[hi - 1] if hi else None)


# ---------------------------------------------------------------- service-level objectives


@dataclass(frozen=True)
class Slo:
    """What the operator's users need: every objective in ms."""

    objectives: tuple[tuple[SloMetric, float], ...]  # (metric, limit in ms), in the order given
    names: tuple[str, ...] = ()  # as given on the command line
    target_pct: float = DEFAULT_SLO_TARGET_PCT  # a level meets the SLO when this share of requests does

    def describe(self) -> str:
        return ", ".join(f"{name} <= {limit:g} ms" for name, (_, limit) in zip(self.names, self.objectives, strict=True))

    def to_json(self) -> dict[str, Any]:
        return {"objectives_ms": {name: limit for name, (_, limit) in zip(self.names, self.objectives, strict=True)},
                "metrics": {name: metric for name, (metric, _) in zip(self.names, self.objectives, strict=True)},
                "target_pct": self.target_pct}


def parse_slo(items: Sequence[str], target_pct: float = DEFAULT_SLO_TARGET_PCT) -> Slo | None:
    """``["ttft:500", "e2el:20000"]`` -> Slo; ValueError with one line on a bad name or value."""
    if not items:
        return None
    seen: dict[SloMetric, str] = {}
    objectives: list[tuple[SloMetric, float]] = []
    names: list[str] = []
    for item in items:
        name, sep, raw = item.partition(":")
        name = name.strip().lower()
        if not sep or name not in SLO_NAMES:
            raise ValueError(f"--slo {item!r}: expected NAME:MS with NAME one of {', '.join(SLO_NAMES)}")
        metric = SLO_NAMES[name][0]
        text = raw.strip().lower().removesuffix("ms").strip()
        try:
            value = float(text)
        except ValueError:
            raise ValueError(f"--slo {item!r}: {raw!r} is not a number of milliseconds") from None
        if not math.isfinite(value) or value <= 0 or value > 86_400_000:
            raise ValueError(f"--slo {item!r}: the limit must be more than 0 and at most a day in ms")
        if metric in seen:
            raise ValueError(f"--slo {item!r}: {SLO_WORDS[metric]} is already limited by {seen[metric]!r}")
        seen[metric] = name
        objectives.append((metric, value))
        names.append(name)
    if not 0 < target_pct <= 100:
        raise ValueError("--slo-target must be a percentage above 0 and at most 100")
    return Slo(tuple(objectives), tuple(names), target_pct)


def meets(record: Any, slo: Slo) -> bool:
    """One measured request (a ``RequestRecord``) against every objective."""
    if not record.ok:
        return False
    for metric, limit in slo.objectives:
        if metric == "ttft":
            value = record.ttft_s
        elif metric == "latency":
            value = record.latency_s
        else:
            value = record.itl_s if (record.output_tokens or 0) >= 2 else 0.0
            if value is None:  # two tokens in one instant: no gap to exceed
                value = 0.0
        if value is None or value * 1000.0 > limit:
            return False
    return True


@dataclass(frozen=True)
class Goodput:
    met: int
    requests: int
    per_s: float | None

    @property
    def pct(self) -> float | None:
        return None if not self.requests else 100.0 * self.met / self.requests


def goodput(records: Sequence[Any], slo: Slo, duration_s: float | None) -> Goodput:
    met = sum(1 for r in records if meets(r, slo))
    return Goodput(met, len(records), met / duration_s if duration_s and duration_s > 0 else None)


def slo_answer(levels: Sequence[Any], slo: Slo) -> dict[str, Any]:
    """The largest concurrency whose goodput reaches the target, with its throughput, per prompt
    depth, and the one line that says it (``levels``: ``LevelResult``s carrying ``goodput_pct``)."""
    depths = sorted({getattr(lv, "depth", 0) for lv in levels})
    answers = []
    for d in depths:
        at = [lv for lv in levels if getattr(lv, "depth", 0) == d and lv.goodput_pct is not None]
        ok = [lv for lv in at if lv.goodput_pct >= slo.target_pct]
        best = max(ok, key=lambda lv: lv.concurrency) if ok else None
        where = f" at depth {d:,}" if len(depths) > 1 or d else ""
        if best is not None:
            line = (f"within SLO ({slo.describe()}; {slo.target_pct:g}% of requests){where}: up to "
                    f"{best.label} users, {_f(best.total_tok_s, ',.1f')} tok/s total, "
                    f"{_f(best.per_user_tok_s, ',.1f')} per user, goodput {best.goodput_pct:.0f}%")
            above = [lv for lv in at if lv.concurrency > best.concurrency]
            if above:
                nxt = min(above, key=lambda lv: lv.concurrency)
                line += f" (C{nxt.concurrency}: {nxt.goodput_pct:.0f}%)"
        elif at:
            top = max(at, key=lambda lv: (lv.goodput_pct, -lv.concurrency))
            line = (f"within SLO ({slo.describe()}; {slo.target_pct:g}% of requests){where}: NO level -- "
                    f"the best, {top.label}, has goodput {top.goodput_pct:.0f}%")
        else:
            line = f"within SLO ({slo.describe()}){where}: no level measured"
        answers.append({"depth": d, "max_concurrency": best.concurrency if best else None,
                        "total_tok_s": _round(best.total_tok_s) if best else None,
                        "per_user_tok_s": _round(best.per_user_tok_s) if best else None,
                        "goodput_pct": _round(best.goodput_pct) if best else None, "line": line})
    return {**slo.to_json(), "answers": answers}


def level_tail(records: Sequence[Any], ttfts_ms: Sequence[float], itls_ms: Sequence[float],
               lats_s: Sequence[float], duration_s: float | None, slo: Slo | None,
               spec: tuple[int, int] | None) -> dict[str, Any]:
    """The ``LevelResult`` fields this module owns: p90s, the intervals, goodput, input tokens and the
    speculative-decoding acceptance over the level."""
    series = {"ttft_ms": ttfts_ms, "itl_ms": itls_ms, "latency_s": lats_s}
    out: dict[str, Any] = {f"{name}_p90": percentile(xs, 90) for name, xs in series.items()}
    out["ci95"] = {f"{name}_p{q}": list(percentile_ci(xs, q)) for name, xs in series.items() for q in PERCENTILES}
    if slo is not None:
        g = goodput(records, slo, duration_s)
        out |= {"goodput_pct": g.pct, "goodput_req_s": g.per_s, "slo_met": g.met}
    inputs = [r.input_tokens for r in records if r.ok and r.input_tokens is not None]
    out["input_tokens_mean"] = sum(inputs) / len(inputs) if inputs else None
    if spec is not None and spec[0] > 0:
        out["spec_drafts"] = spec[0]
        out["spec_accept_length"] = 1.0 + spec[1] / spec[0]
    return out


def spec_stuck_warning(lv: Any) -> str | None:
    """Speculative decoding that never accepts a draft token: every step pays for the drafts and
    emits one token (acceptance length exactly 1.00) -- slower than no speculation."""
    if lv.spec_drafts and lv.spec_accept_length is not None and lv.spec_accept_length <= 1.0:
        return (f"C{lv.concurrency}: speculative decoding accepted none of {lv.spec_drafts:,} drafts "
                "(acceptance length exactly 1.00): the draft/MTP layers predict nothing the model keeps "
                "(missing or mis-quantized MTP weights, a draft model for another tokenizer): every step "
                "pays for the drafts; fix the draft weights or turn speculative decoding off")
    return None


def _f(v: float | None, fmt: str) -> str:
    return "-" if v is None else format(v, fmt)


def _round(v: float | None) -> float | None:
    return None if v is None else round(v, 2)
