"""Terminal and JSON rendering of a ``mem bench`` run.

The ``summary`` dict is produced by :meth:`memcli.bench.metrics.Aggregator.summary` and is
exactly what ``mem bench --out report.json`` writes, so the table and the file never disagree.
Shape (all metric values are means in [0, 1] unless noted)::

    {
      "meta": {...},                 # free-form run description from the runner, e.g.
                                     # {"dataset": "locomo-dev.json", "format": "locomo",
                                     #  "budget": 2000, "arms": ["fts", "vec", ...]}
      "ks": [1, 3, 5, 10, 30, 50],   # cut-offs used for the @k metrics
      "counts": {"questions": 999,   # free-form tallies from the runner, e.g.
                 "scored": 760,      # "skipped:category-5", "skipped:no-gold", "cases"
                 "skipped:category-5": 237},
      "levels": {                    # "item" always; "session" for LongMemEval; "raw-floor"
                                     # for lme (one vector per session, cosine only);
                                     # "shown" / "session shown": the same scored over
                                     # what recall printed (after the floor and budget)
        "item": {
          "overall":    ROW,
          "categories": {"1": ROW, "2": ROW, ...},      # numeric names sorted numerically
          "arms":       {"fts": ROW, "vec": ROW, ...}   # in the order the runner added them
        }
      },
      "latency_ms": {"retain": {"n": 2760, "p50": 3.1, "p95": 9.8, "mean": 4.0}, ...}
    }

    ROW = {"n": 142,                 # questions recorded in this row
           "metrics": {"candidateRecall": 0.93, "recall@10": 0.81, "rankingLoss@10": 0.12,
                       "budgetLoss@10": 0.02, "hitAny@10": 0.9, "recall_all@10": 0.7,
                       "MRR": 0.6, "nDCG@10": 0.66, "checklistCoverage": ..., "distractorRate": ...,
                       "uniqueRecall": ...},          # arms only
           "metric_n": {"checklistCoverage": 40, ...}} # questions each mean is over

Metric names are defined in :mod:`memcli.bench.metrics`; a metric absent from every row of a
level is not shown as a column.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

__all__ = ["format_table", "to_json"]

LEGEND = (
    "cand = gold found by any arm before fusion (arm rows: by that arm);\n"
    "R@k = share of gold in top k; rLoss = cand - R@k; bLoss = gold in top k cut by the budget;\n"
    "hit = any gold in top k; all = every gold in top k; chk = checklist points covered;\n"
    "dist = share of top k that are distractors; only = share of gold found by this arm alone."
)


def _focus_k(ks: list[int]) -> int | None:
    """The single k for the loss/hit/all/nDCG columns: 10 when measured, else the largest."""
    if not ks:
        return None
    return 10 if 10 in ks else max(ks)


def _columns(ks: list[int], every_hit: bool = False) -> list[tuple[str, str]]:
    """(header, metric name) pairs in display order; ``n`` is handled separately.
    ``every_hit``: hit@k for every k (session levels: LongMemEval's recall_any@k), else
    only at the focus k."""
    cols: list[tuple[str, str]] = [("cand", "candidateRecall")]
    cols += [(f"R@{k}", f"recall@{k}") for k in ks]
    fk = _focus_k(ks)
    if every_hit:
        cols += [(f"hit@{k}", f"hitAny@{k}") for k in ks]
    if fk is not None:
        cols += [
            (f"rLoss@{fk}", f"rankingLoss@{fk}"),
            (f"bLoss@{fk}", f"budgetLoss@{fk}"),
        ]
        if not every_hit:
            cols.append((f"hit@{fk}", f"hitAny@{fk}"))
        cols.append((f"all@{fk}", f"recall_all@{fk}"))
    cols.append(("MRR", "MRR"))
    if fk is not None:
        cols.append((f"nDCG@{fk}", f"nDCG@{fk}"))
    cols += [("chk", "checklistCoverage"), ("dist", "distractorRate"), ("only", "uniqueRecall")]
    return cols


def _fmt(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{float(value):.3f}"


def _render(headers: list[str], rows: list[list[str] | None]) -> list[str]:
    """Fixed-width text: first column left-aligned, the rest right-aligned; None = rule."""
    real = [r for r in rows if r is not None]
    widths = [max([len(h), *(len(r[i]) for r in real)]) for i, h in enumerate(headers)]

    def line(cells: list[str]) -> str:
        first = cells[0].ljust(widths[0])
        rest = [c.rjust(w) for c, w in zip(cells[1:], widths[1:], strict=True)]
        return "  ".join([first, *rest]).rstrip()

    rule = "-" * len(line(headers))
    out = [line(headers), rule]
    for row in rows:
        out.append(rule if row is None else line(row))
    return out


def _level_table(level: Mapping[str, Any], ks: list[int], every_hit: bool = False) -> list[str]:
    """One metrics table for a level: overall, then categories, then arms."""
    sections: list[list[tuple[str, Mapping[str, Any]]]] = [
        [("overall", level.get("overall") or {"n": 0, "metrics": {}})],
        [(f"cat {name}", row) for name, row in (level.get("categories") or {}).items()],
        [(f"arm {name}", row) for name, row in (level.get("arms") or {}).items()],
    ]
    present: set[str] = set()
    for section in sections:
        for _, row in section:
            present.update((row.get("metrics") or {}).keys())
    cols = [(h, m) for h, m in _columns(ks, every_hit) if m in present]
    headers = ["", "n", *(h for h, _ in cols)]
    rows: list[list[str] | None] = []
    for section in sections:
        if not section:
            continue
        if rows:
            rows.append(None)
        for label, row in section:
            metrics = row.get("metrics") or {}
            rows.append([label, str(row.get("n", 0)), *(_fmt(metrics.get(m)) for _, m in cols)])
    return _render(headers, rows)


_LOSS_CLASSES = ("never_candidate", "ranked_out", "below_floor", "budget_cut", "hit")
_LOSS_HEADERS = ("never cand", "ranked out", "below floor", "budget cut", "hit")


def _loss_row(label: str, counts: Mapping[str, int]) -> list[str]:
    """One row of a loss split: each class as count (share)."""
    n = sum(int(counts.get(c, 0)) for c in _LOSS_CLASSES)
    cells = [
        f"{int(counts.get(c, 0))} ({counts.get(c, 0) / n:.0%})" if n else "0" for c in _LOSS_CLASSES
    ]
    return [label, str(n), *cells]


def format_table(summary: Mapping[str, Any]) -> str:
    """Render a summary (shape in the module docstring) as fixed-width terminal tables.

    One metrics table per level (rows: overall, each category, each arm; columns only for
    metrics that were measured), a latency table (phase, n, p50 ms, p95 ms) and a short legend,
    so a run can be read without opening the JSON.
    """
    ks = sorted(int(k) for k in summary.get("ks") or [])
    lines: list[str] = []
    meta = summary.get("meta") or {}
    if meta:
        lines.append("mem bench  " + "  ".join(f"{k}={v}" for k, v in meta.items()))
    counts = summary.get("counts") or {}
    if counts:
        lines.append("counts     " + "  ".join(f"{k}={v}" for k, v in counts.items()))
    levels = summary.get("levels") or {}
    for name, level in levels.items():
        if lines:
            lines.append("")
        if len(levels) > 1:
            lines.append(f"level: {name}")
        lines += _level_table(level, ks, every_hit=name not in ("item", "shown"))
    for key, what in (("losses", "gold items"), ("session_losses", "gold sessions")):
        split = summary.get(key) or {}
        overall = split.get("overall") or {}
        if not overall or not sum(overall.values()):
            continue
        lines.append("")
        lines.append(f"where {what} are lost at k={split.get('k')}:")
        loss_rows: list[list[str] | None] = [_loss_row("all", overall)]
        loss_rows += [_loss_row(name, v) for name, v in (split.get("categories") or {}).items()]
        lines += _render(["", "n", *_LOSS_HEADERS], loss_rows)
    latency = summary.get("latency_ms") or {}
    if latency:
        lines.append("")
        rows: list[list[str] | None] = [
            [phase, str(v.get("n", "")), f"{v['p50']:.1f}", f"{v['p95']:.1f}"]
            for phase, v in latency.items()
        ]
        lines += _render(["phase", "n", "p50 ms", "p95 ms"], rows)
    if levels:
        lines += ["", LEGEND]
    return "\n".join(lines) + "\n"


def to_json(summary: Mapping[str, Any]) -> str:
    """Serialise a summary for ``--out``; non-JSON values in ``meta`` become strings."""
    return json.dumps(summary, indent=2, ensure_ascii=False, default=str) + "\n"
