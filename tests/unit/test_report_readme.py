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


def host_columns(block: str) -> tuple[list[str], dict[str, list[str]]]:
    """The per-host table: its host headings, and each measure's cells under them."""
    header = next(line for line in block.splitlines() if line.startswith("| measure | goal |"))
    headings = [cell.strip() for cell in header.strip("|").split(" | ")][2:]
    return headings, {row[0]: row[2:] for row in table_rows(block, "| measure | goal |")}


def test_issue_29s_measures_have_one_column_per_host_they_were_run_on(tmp_path: Path) -> None:
    block, page = render(tmp_path, RESULTS)
    headings, cells = host_columns(block)
    # The committed runs: the fast class, the AVX2 class faster than real time, and the AVX2 machine
    # slower than real time, in order of speed, each named by its class and RTF.
    assert [heading.split(",")[0] for heading in headings] == ["avx512-vnni", "avx2", "avx2"]
    assert "slower than real time" in headings[-1] and "slower" not in headings[1]
    assert all("RTF " in heading for heading in headings)
    route = cells["First audio p50 at the bidi route (5-50 words, digits, a paragraph)"]
    expected = json.loads((RESULTS / "route_first_audio_avx2.json").read_text())["results"]
    firsts = [row["first_audio_ms_p50"] for row in expected.values()]
    assert route[1] == f"{min(firsts):,.0f}–{max(firsts):,.0f} ms"
    assert route[2] == "–"  # no route run on the slow machine
    # The AVX2 column's engine row is the newest of its engine files, the one with the floor.
    floor = cells["The floor: first audio of the plan's smallest first window, unpaced"]
    assert floor[0] == "–" and floor[1].endswith(" ms")
    assert "slow_host_avx2_floor.json" in block and "`slow_host_avx2.json`" not in block
    assert "## Per host" in page and host_columns(page) == (headings, cells)


def test_a_run_on_another_host_gets_its_own_column_and_one_without_a_host_record_none(tmp_path: Path) -> None:
    results = tmp_path / "results"
    shutil.copytree(RESULTS, results)
    demo = json.loads((results / "demo_ratio_avx2.json").read_text())
    demo["machine"].update(host_class="intel-avx512-amx", whole_sentence_rtf=0.37)
    (results / "demo_ratio_avx2.json").write_text(json.dumps(demo))
    peer = json.loads((results / "peer_kokoro_onnx.json").read_text())
    peer["machine"].pop("host_class")  # written before the host record: no column
    (results / "peer_kokoro_onnx.json").write_text(json.dumps(peer))
    block, _ = render(tmp_path, results)
    headings, cells = host_columns(block)
    # In order of speed; the AVX2 machine slower than real time had only the peer's run.
    assert [heading.split(",")[0] for heading in headings] == ["avx512-vnni", "intel-avx512-amx", "avx2"]
    assert headings[1] == "intel-avx512-amx, RTF 0.37"
    ratio = demo["variants"]["streaming"]["batch_over_bidi_median_of_paired"]
    assert cells["`make demo`: batch / bidi first audio"] == ["–", f"{ratio}x", "–"]
