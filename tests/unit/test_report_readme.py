"""benchmarks/report.py: the README gets the few rows a newcomer needs, each with its host.

Runs the real script over the committed results (it measures nothing) into a scratch README and
report, so the repository's own files are left alone.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results"
START = "<!-- results:start (benchmarks/report.py writes this block) -->"
END = "<!-- results:end -->"


def render(tmp_path: Path, results: Path) -> tuple[str, str]:
    """(the README's results block, REPORT.md) as report.py writes them from `results`."""
    readme = tmp_path / "README.md"
    readme.write_text(f"# title\n\n{START}\nold\n{END}\n\nafter\n")
    page = tmp_path / "REPORT.md"
    subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "report.py"), "--results", str(results), "--out", str(page),
         "--readme", str(readme)],
        check=True,
        capture_output=True,
    )  # fmt: skip
    text = readme.read_text()
    assert text.endswith(f"{END}\n\nafter\n")
    return text.split(START, 1)[1].split(END, 1)[0], page.read_text()


def table_rows(markdown: str, header_start: str) -> list[list[str]]:
    lines = markdown.splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith(header_start))
    rows = []
    for line in lines[first + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split(" | ")])
    return rows


def test_the_readme_shows_a_few_rows_with_their_host_and_links_the_report(tmp_path: Path) -> None:
    block, page = render(tmp_path, RESULTS)
    rows = table_rows(block, "| experiment |")
    labels = [row[0].split(".", 1)[0] for row in rows]
    assert labels == ["8", "10", "3", "9", "9b", "7"]  # first audio, demo ratio, stall, throughput, WER
    # Each row names its host: the JSON's host class where it records one, else its CPU.
    hosts = {
        machine.get("host_class") or machine.get("cpu")
        for machine in (json.loads(path.read_text()).get("machine") for path in RESULTS.glob("*.json"))
        if machine
    }
    assert all(row[-1] in hosts for row in rows), [row[-1] for row in rows]
    assert "[REPORT.md](REPORT.md)" in block
    assert "The *anchor* is [aws-samples/sample-kokoro-tts-for-ai-agents]" in block
    # The report keeps the whole headline, with the command of every row.
    headline = table_rows(page, "| experiment | anchor | goal | ours | goal met | reproduce |")
    assert len(headline) > len(rows)
    assert all(re.fullmatch(r"`.+`", row[-1]) for row in headline)
    assert f"all {len(headline)} rows" in block


def test_a_row_names_its_host_class_when_its_json_records_one(tmp_path: Path) -> None:
    results = tmp_path / "results"
    shutil.copytree(RESULTS, results)
    demo = json.loads((results / "demo_ratio.json").read_text())
    demo["machine"]["host_class"] = "intel-avx512-amx"
    (results / "demo_ratio.json").write_text(json.dumps(demo))
    first_audio = json.loads((results / "first_audio_length.json").read_text())
    first_audio["machine"].pop("host_class", None)  # a JSON from before host_class: its CPU stands in
    (results / "first_audio_length.json").write_text(json.dumps(first_audio))
    block, _ = render(tmp_path, results)
    hosts = {row[0].split(".", 1)[0]: row[-1] for row in table_rows(block, "| experiment |")}
    assert hosts["10"] == "intel-avx512-amx"
    assert hosts["8"] == "AMD EPYC"
