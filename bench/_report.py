"""The bench JSON protocol: one row per figure of issue 15's table, written by every bench
script under ``--json PATH`` and read back by ``python -m bench``.

A row is a plain dict (JSON as written) so a script needs nothing but :func:`row` and
:func:`write_rows`; the aggregator checks each row it reads with :func:`check_row`.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

__all__ = ["FIELDS", "check_row", "row", "time_ratio_row", "write_rows"]

#: Every key of a row, in the order the aggregator's table shows them.
FIELDS = (
    "measure",
    "database",
    "setting",
    "value",
    "unit",
    "baseline_name",
    "baseline",
    "ratio",
    "target",
    "met",
)


def row(
    measure: str,
    *,
    value: float | None,
    unit: str,
    target: str,
    met: bool,
    database: str = "-",
    setting: str = "",
    baseline_name: str | None = None,
    baseline: float | None = None,
    ratio: float | None = None,
) -> dict[str, Any]:
    """One figure; ``ratio`` is given by the caller because its sense (time or throughput)
    is the measure's, not the protocol's."""
    return {
        "measure": measure,
        "database": database,
        "setting": setting,
        "value": value,
        "unit": unit,
        "baseline_name": baseline_name,
        "baseline": baseline,
        "ratio": ratio,
        "target": target,
        "met": met,
    }


def time_ratio_row(
    measure: str,
    ours: float,
    theirs: float,
    *,
    unit: str,
    baseline_name: str,
    target: float,
    database: str = "-",
    setting: str = "",
) -> dict[str, Any]:
    """A time (in ``unit``) over its baseline's, met at or below ``target``: lower is
    better; the times to 0.01 and the ratio to 0.001 (pay-url, live settle, verify)."""
    value = ours / theirs if theirs else math.nan
    return row(
        measure,
        database=database,
        setting=setting,
        value=round(ours, 2),
        unit=unit,
        baseline_name=baseline_name,
        baseline=round(theirs, 2),
        ratio=round(value, 3),
        target=f"<= {target}",
        met=bool(value <= target),
    )


def write_rows(path: str | Path, rows: list[dict[str, Any]]) -> None:
    for r in rows:
        check_row(r)
    Path(path).write_text(json.dumps(rows, indent=1, ensure_ascii=False) + "\n", "utf-8")


def check_row(r: Any) -> dict[str, Any]:
    """``r`` if it is a protocol row; ``ValueError`` naming what is wrong otherwise."""
    if not isinstance(r, dict):
        raise ValueError(f"a row must be an object, not {type(r).__name__}")
    missing = [f for f in ("measure", "value", "target", "met") if f not in r]
    if missing:
        raise ValueError(f"row {r.get('measure')!r} lacks {', '.join(missing)}")
    if not isinstance(r["measure"], str) or not r["measure"]:
        raise ValueError("a row's measure must be a non-empty string")
    for number in ("value", "baseline", "ratio"):
        v = r.get(number)
        if v is not None and (
            isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v)
        ):
            raise ValueError(f"row {r['measure']!r}: {number} must be a finite number or null")
    if not isinstance(r["met"], bool):
        raise ValueError(f"row {r['measure']!r}: met must be true or false")
    return r
