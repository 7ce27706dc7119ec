"""The report's plots, drawn from benchmarks/results/*.json (measures nothing itself).

- isolated_first_audio.png: first audio per variant of experiment 1, every run;
- agent_first_audio.png: first audio per mode and LLM pace of experiment 2, every run;
- gapless_timeline.png: audio buffered ahead of the player over time, stalls shaded (3);
- concurrency_first_audio.png: first audio per session at each concurrency level (6);
- payload_overhead.png: bytes on the wire beyond the audio, by path, format and framing (5).

A plot whose JSON is missing is skipped.

    .venv/bin/python benchmarks/plots.py [--results benchmarks/results]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt
from matplotlib.axes import Axes

from common import RESULTS

COLORS = {
    "whole_unsplit": "#c0392b",
    "whole": "#e67e22",
    "sentences": "#2980b9",
    "first_clause": "#27ae60",
    "first_clause_3": "#16a085",
    "bidi": "#27ae60",
    "batch": "#e67e22",
    "batch_unsplit": "#c0392b",
    "stop_and_wait": "#8e44ad",
}


def load(results: Path, name: str) -> dict[str, Any] | None:
    path = results / f"{name}.json"
    return json.loads(path.read_text()) if path.exists() else None


def strip(ax: Axes, groups: list[tuple[str, list[float], str]]) -> None:
    """Every run as a dot over a box of its group: distributions of a few runs stay honest."""
    data = [values for _, values, _ in groups]
    ax.boxplot(data, widths=0.5, showfliers=False, medianprops={"color": "black"})
    for index, (_, values, color) in enumerate(groups, start=1):
        offsets = [index + (i - (len(values) - 1) / 2) * 0.06 for i in range(len(values))]
        ax.scatter(offsets, values, color=color, zorder=3, s=22)
    ax.set_xticks(range(1, len(groups) + 1), [label for label, _, _ in groups], rotation=20, ha="right")
    ax.grid(axis="y", alpha=0.3)


def isolated(report: dict[str, Any], out: Path) -> None:
    groups = []
    for name, row in report["variants"].items():
        source = row["same_runs_as"] or name
        values = [r["first_audio_ms"] / 1000 for r in report["runs"][source]]
        label = f"{name}\n({row['pieces']} msg)"
        groups.append((label, values, COLORS.get(name, "gray")))
    fig, ax = plt.subplots(figsize=(8, 4.5))
    strip(ax, groups)
    ax.set_ylabel("time to first audio at the client (s)")
    ax.set_title("Isolated TTS: the 4-sentence paragraph, by how it is sent")
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    plt.close(fig)


def agent(report: dict[str, Any], out: Path) -> None:
    groups = []
    for row in report["table"]:
        mode, pace = row["mode"], row["tokens_per_s"]
        values = [
            r["first_audio_ms"] / 1000
            for r in report["runs"]
            if r["mode"] == mode and r["tokens_per_s"] == pace and r["first_audio_ms"] is not None
        ]
        groups.append((f"{mode}\n{pace:g} tok/s", values, COLORS.get(mode, "gray")))
    fig, ax = plt.subplots(figsize=(10, 4.5))
    strip(ax, groups)
    ax.set_ylabel("time to first audio at the caller (s)")
    ax.set_title("Voice agent reply through the speak function: bidi vs batch")
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    plt.close(fig)


def gapless(report: dict[str, Any], out: Path) -> None:
    timelines = report["timelines"]
    fig, axes = plt.subplots(len(timelines), 1, figsize=(10, 2.2 * len(timelines)), sharex=True, squeeze=False)
    for ax, (mode, line) in zip(axes[:, 0], timelines.items(), strict=True):
        times = [point[0] for point in line["buffer"]]
        ahead = [point[1] for point in line["buffer"]]
        ax.fill_between(times, ahead, step=None, color=COLORS.get(mode, "gray"), alpha=0.5)
        ax.plot(times, ahead, color=COLORS.get(mode, "gray"), linewidth=1)
        for at, duration in line["stalls"]:
            ax.axvspan(at, at + duration, color="red", alpha=0.3)
        ax.set_ylabel("buffered (s)")
        ax.set_title(f"{mode}: stall {line['stall_ms']:g} ms after playback starts", fontsize=10, loc="left")
        ax.grid(alpha=0.3)
    axes[-1, 0].set_xlabel(
        f"seconds since the request (LLM at {report['tokens_per_s']:g} tokens/s; red: player stalled)"
    )
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    plt.close(fig)


def concurrency(report: dict[str, Any], out: Path) -> None:
    groups = []
    for row in report["levels"]:
        values = [r["first_audio_ms"] / 1000 for r in row["runs"] if r["first_audio_ms"] is not None]
        label = f"{row['sessions']} sessions\n{row['audio_s_per_wall_s']:g} audio s/s"
        groups.append((label, values, "#2980b9"))
    fig, ax = plt.subplots(figsize=(8, 4.5))
    strip(ax, groups)
    ax.set_ylabel("time to first audio per session (s)")
    ax.set_title("Simultaneous sessions, each speaking the paragraph")
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    plt.close(fig)


def payload(report: dict[str, Any], out: Path) -> None:
    rows = report["rows"]
    labels = [f"{r['path']}\n{r['format']} {r['framing']}" for r in rows]
    colors = ["#c0392b" if r["framing"] == "sse" else "#2980b9" for r in rows]
    # Bytes on the wire beyond the audio itself: comparable across PCM (384 kbps) and MP3 (48).
    overhead = [r["wire_bytes_down"] / r["audio_bytes"] * 100 - 100 for r in rows]
    fig, ax = plt.subplots(figsize=(11, 4.5))
    bars = ax.bar(range(len(rows)), overhead, color=colors)
    ax.bar_label(bars, [f"+{value:.0f}%" for value in overhead], fontsize=8)
    ax.set_xticks(range(len(rows)), labels, rotation=45, ha="right", fontsize=8)
    ax.set_ylabel("bytes on the wire beyond the audio (%)")
    ax.set_title("Payload: binary framing (blue) vs SSE base64 (red)")
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    plt.close(fig)


PLOTS = {
    "isolated": ("isolated_first_audio.png", isolated),
    "agent": ("agent_first_audio.png", agent),
    "gapless": ("gapless_timeline.png", gapless),
    "concurrency": ("concurrency_first_audio.png", concurrency),
    "payload": ("payload_overhead.png", payload),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=RESULTS)
    args = parser.parse_args()
    for name, (filename, draw) in PLOTS.items():
        report = load(args.results, name)
        if report is None:
            print(f"skipped {filename}: no {name}.json")
            continue
        draw(report, args.results / filename)
        print(f"wrote {args.results / filename}")


if __name__ == "__main__":
    main()
