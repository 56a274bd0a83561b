"""``python -m bench`` on stand-in scripts: the table and JSON it assembles, the markdown
section it replaces, and its exit code when a script fails.  The real benches are never
run here (they take minutes and measure, which tests do not)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
REPORT = (ROOT / "bench" / "_report.py").read_text()

# A stand-in bench: writes the protocol rows it is given, after checking the flags it got.
GOOD = """
import argparse, json, sys
from _report import row, write_rows
p = argparse.ArgumentParser()
p.add_argument("--json"); p.add_argument("--quick", action="store_true")
p.add_argument("--databases", default="sqlite")
a = p.parse_args()
assert a.quick, "--quick is passed through"
rows = [
    row("widget latency", database=db, setting="1 client", value=9.5, unit="ms",
        baseline_name="raw", baseline=10.0, ratio=0.95, target="<= 1.0", met=True)
    for db in a.databases.split(",")
]
rows.append(row("widget p99", database="postgresql", value=120.0, unit="ms",
                target="< 100 ms", met=False))
write_rows(a.json, rows)
"""
LOST = GOOD + "sys.exit('1 event lost')\n"
SILENT = "import sys\n"  # exits 0 and writes nothing


def run_bench(
    tmp_path: Path, scripts: dict[str, str], *extra: str
) -> subprocess.CompletedProcess[str]:
    bench_dir = tmp_path / "benchdir"
    bench_dir.mkdir()
    (bench_dir / "_report.py").write_text(REPORT)
    for name, source in scripts.items():
        (bench_dir / f"{name}.py").write_text(source)
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "bench",
            "--bench-dir",
            str(bench_dir),
            "--quick",
            "--only",
            ",".join(scripts),
            "--postgres-url",
            "postgresql://nobody@127.0.0.1:1/x",
            *extra,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_rows_of_every_script_make_one_table_and_a_markdown_section(tmp_path: Path) -> None:
    doc = tmp_path / "performance.md"
    doc.write_text(
        "# Performance\n\nbefore\n\n<!-- bench:start -->\nold\n<!-- bench:end -->\n\nafter\n"
    )
    out = tmp_path / "all.json"

    result = run_bench(
        tmp_path,
        {"pay_url": GOOD},
        "--databases",
        "sqlite,postgresql",
        "--markdown",
        str(doc),
        "--json",
        str(out),
    )

    assert result.returncode == 0, result.stdout + result.stderr
    table = result.stdout.split("measure", 1)[1]
    assert "widget latency" in table and "raw 10.0 ms" in table and "0.95x" in table
    assert table.count("✓") == 2 and table.count("✗") == 1  # a missed target is not a failure
    assert (
        "Machine: " in result.stdout and "Python " in result.stdout and "SQLite " in result.stdout
    )

    text = doc.read_text()
    assert text.startswith("# Performance\n\nbefore\n\n<!-- bench:start -->\n| measure |")
    assert text.endswith("<!-- bench:end -->\n\nafter\n") and "old" not in text
    assert "| widget p99 | postgresql |  | 120 ms | - | - | < 100 ms | ✗ |" in text

    saved = json.loads(out.read_text())
    assert [r["database"] for r in saved["rows"]] == ["sqlite", "postgresql", "postgresql"]


@pytest.mark.parametrize(
    ("broken", "reason"),
    [(LOST, "exited 1"), (SILENT, "wrote no rows"), ("import sys; sys.exit(3)\n", "exited 3")],
)
def test_a_failing_script_is_an_error_row_and_a_non_zero_exit(
    tmp_path: Path, broken: str, reason: str
) -> None:
    result = run_bench(tmp_path, {"webhook_verify": GOOD, "webhook_delivery": broken})

    assert result.returncode == 1
    assert "webhook_delivery: ERROR" in result.stdout and reason in result.stdout
    assert "widget latency" in result.stdout  # the scripts that worked still report
