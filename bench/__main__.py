"""``python -m bench``: every bench of issue 15 in turn, one table.

Each script runs as its own subprocess with ``--json`` into a temporary file (and
``--quick`` / ``--databases`` passed through where given); its rows are read back and
printed as one table with the machine it ran on.  A script that exits non-zero (an event
lost, a request erred, a crash) or writes no rows becomes an error row, and the command
then exits 1.  A missed target is a ✗ in the table, not a failure: the figures are the
result.  ``--markdown PATH`` also writes the table into PATH, between the markers
``<!-- bench:start -->`` and ``<!-- bench:end -->`` if PATH has them (docs/performance.md
does), replacing the whole file otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench._harness import DEFAULT_POSTGRES, versions_line
from bench._report import check_row, row

BENCH_DIR = Path(__file__).resolve().parent
#: In the order they run: the quick in-process ones first.
SCRIPTS = (
    "webhook_verify",
    "sdk_overhead",
    "gate_overhead",
    "stream_gate",
    "receipt_token",
    "dashboard",
    "pay_throughput",
    "pay_url",
    "live_settle",
    "webhook_delivery",
)
#: Scripts without a database (``--databases`` is not passed to them).
NO_DATABASE = frozenset({"webhook_verify", "gate_overhead", "stream_gate"})
START, END = "<!-- bench:start -->", "<!-- bench:end -->"
COLUMNS = (
    "measure",
    "database",
    "setting",
    "ours",
    "baseline",
    "ratio",
    "target",
    "met",
)


# --- running the scripts ------------------------------------------------------------------


def run_script(
    name: str, bench_dir: Path, passthrough: list[str], timeout: float
) -> tuple[list[dict[str, Any]], str | None]:
    """The script's rows, and an error (``None`` when it exited 0 with rows)."""
    script = bench_dir / f"{name}.py"
    with tempfile.TemporaryDirectory(prefix="svc-bench-") as tmp:
        out = Path(tmp) / "rows.json"
        command = [sys.executable, str(script), "--json", str(out), *passthrough]
        print(f"\n$ {' '.join(command[1:])}", flush=True)
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        try:
            exit_code = subprocess.run(command, env=env, timeout=timeout, check=False).returncode
        except subprocess.TimeoutExpired:
            return [], f"did not finish in {timeout:.0f} s"
        rows: list[dict[str, Any]] = []
        problem: str | None = None
        if out.exists():
            try:
                loaded = json.loads(out.read_text("utf-8"))
                if not isinstance(loaded, list):
                    raise ValueError("not a JSON list")
                rows = [check_row(r) for r in loaded]
            except ValueError as exc:
                problem = f"unreadable rows ({exc})"
    if exit_code != 0:
        return rows, f"exited {exit_code}"
    if problem:
        return [], problem
    if not rows:
        return [], "wrote no rows"
    return rows, None


def error_row(name: str, error: str) -> dict[str, Any]:
    failed = row(f"{name}: ERROR", setting=error, value=None, unit="", target="", met=False)
    return {**failed, "error": True}


# --- the machine --------------------------------------------------------------------------


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine_line(postgres_url: str, *, when: datetime | None = None) -> str:
    when = when or datetime.now(UTC)
    versions = versions_line(["sqlite", "postgresql"], postgres_url)
    return f"{cpu_model()}, {os.cpu_count()} cores, {versions}, {when:%Y-%m-%d %H:%M} UTC"


# --- the table ----------------------------------------------------------------------------


def _number(value: float | None) -> str:
    if value is None:
        return "-"
    if abs(value) >= 100:
        return f"{value:.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def cells(r: dict[str, Any]) -> list[str]:
    """One row as the table's text cells."""
    if r.get("error"):
        return [r["measure"], r["database"], r["setting"], "-", "-", "-", "-", "✗ error"]
    unit = r.get("unit") or ""
    ours = f"{_number(r['value'])} {unit}".strip()
    if r.get("baseline") is None:
        baseline = "-"
    else:
        baseline = f"{r.get('baseline_name') or 'baseline'} {_number(r['baseline'])} {unit}"
    ratio = "-" if r.get("ratio") is None else f"{r['ratio']:.2f}x"
    return [
        r["measure"],
        r.get("database") or "-",
        r.get("setting") or "",
        ours,
        baseline.strip(),
        ratio,
        r.get("target") or "",
        "✓" if r["met"] else "✗",
    ]


def text_table(rows: Sequence[dict[str, Any]]) -> str:
    body = [cells(r) for r in rows]
    widths = [max(len(c) for c in column) for column in zip(COLUMNS, *body, strict=False)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(COLUMNS, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)) for line in body]
    return "\n".join(line.rstrip() for line in lines)


def markdown_table(rows: Sequence[dict[str, Any]], machine: str) -> str:
    def escape(cell: str) -> str:
        return cell.replace("|", "\\|")

    lines = [
        "| " + " | ".join(COLUMNS) + " |",
        "|" + "---|" * len(COLUMNS),
    ]
    lines += ["| " + " | ".join(escape(c) for c in cells(r)) + " |" for r in rows]
    return "\n".join(lines) + f"\n\nMachine: {machine}.\n"


def write_markdown(path: Path, table: str) -> None:
    """The table between the markers in ``path``, or the whole file if it has none."""
    section = f"{START}\n{table}{END}"
    old = path.read_text("utf-8") if path.exists() else ""
    pattern = re.compile(re.escape(START) + ".*?" + re.escape(END), re.DOTALL)
    found = pattern.search(old)
    path.write_text(
        old[: found.start()] + section + old[found.end() :] if found else section + "\n"
    )


# --- the command --------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="short runs (a smoke test)")
    parser.add_argument("--databases", help="sqlite,postgresql (passed to the scripts)")
    parser.add_argument(
        "--postgres-url", help="the scripts' PostgreSQL (as SVC_TEST_DATABASE_URL, which they read)"
    )
    parser.add_argument("--markdown", metavar="PATH", type=Path, help="also write the table")
    parser.add_argument("--json", metavar="PATH", type=Path, help="also write every row")
    parser.add_argument(
        "--only", help=f"comma-separated subset of: {','.join(SCRIPTS)} (default: all)"
    )
    parser.add_argument("--timeout", type=float, default=1800, help="seconds per script")
    parser.add_argument("--bench-dir", type=Path, default=BENCH_DIR, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    names = args.only.split(",") if args.only else list(SCRIPTS)
    postgres_url = args.postgres_url or DEFAULT_POSTGRES
    if args.postgres_url:
        os.environ["SVC_TEST_DATABASE_URL"] = args.postgres_url  # inherited by every script
    started = time.monotonic()
    rows: list[dict[str, Any]] = []
    failed = False
    for name in names:
        passthrough = ["--quick"] if args.quick else []
        if name not in NO_DATABASE and args.databases:
            passthrough += ["--databases", args.databases]
        if not (args.bench_dir / f"{name}.py").exists():
            script_rows, error = [], "no such script"
        else:
            script_rows, error = run_script(name, args.bench_dir, passthrough, args.timeout)
        rows += script_rows
        if error:
            failed = True
            rows.append(error_row(name, error))

    machine = machine_line(postgres_url)
    print(f"\n{text_table(rows)}\n\nMachine: {machine}.")
    print(f"{len(names)} scripts in {time.monotonic() - started:.0f} s", end="")
    print("; FAILED: a script erred (see its output and the error rows)" if failed else ".")
    if args.markdown:
        write_markdown(args.markdown, markdown_table(rows, machine))
    if args.json:
        args.json.write_text(json.dumps({"machine": machine, "rows": rows}, indent=1) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
