"""Issue 29's measures with one column per host they were run on (report.py puts the table in
REPORT.md and the README's results section).

A host is its CPU's class (`machine.host_class`: avx512-vnni, avx2, ...) and whether it decodes
faster than real time (`machine.whole_sentence_rtf` under 1): machines of one class have been
three times apart in speed, and on one slower than real time no plan keeps a listener in audio.
Each measure reads the result files that hold it (`FILES`, one per host: a file written on
another host gets its own column); a file older than the host record has no column, and a host
without a file for a measure shows a dash.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

Json = dict[str, Any]

# The result files of each benchmark, one per host, newest last (a later file of the same host
# replaces an earlier one): the committed runs that hold issue 29's measures.
FILES: dict[str, tuple[str, ...]] = {
    "route": ("route_first_audio", "route_first_audio_avx2"),
    "engine": ("slow_host", "slow_host_avx2", "slow_host_avx2_floor"),
    "peer": ("peer_kokoro_onnx", "peer_kokoro_onnx_avx2"),
    "demo": ("demo_ratio", "demo_ratio_avx2"),
}


def _range_ms(values: list[float]) -> str | None:
    return f"{min(values):,.0f}–{max(values):,.0f} ms" if values else None


def _engine_texts(r: Json) -> Json:
    """slow_host.py's texts at k = 1: this host as it is."""
    return dict(r["results"].get("k=1", {}).get("texts", {}))


def _route_first_audio(r: Json) -> str | None:
    return _range_ms([row["first_audio_ms_p50"] for row in r["results"].values() if row["first_audio_ms_p50"]])


def _route_worst_gap(r: Json) -> str | None:
    return f"{r['worst_gap_ms_max']:,.0f} ms"


def _engine_first_audio(r: Json) -> str | None:
    texts = _engine_texts(r)
    first = _range_ms([row["first_audio_ms_p50"] for row in texts.values()])
    worst = max((row["worst_gap_ms_max"] for row in texts.values()), default=None)
    return None if first is None or worst is None else f"{first}, worst gap {worst:,.0f} ms"


def _engine_floor(r: Json) -> str | None:
    texts = _engine_texts(r)
    return _range_ms(
        [row["unpaced_first_audio_ms_p50"] for row in texts.values() if "unpaced_first_audio_ms_p50" in row]
    )


def _engine_short_compute(r: Json) -> str | None:
    short = _engine_texts(r).get("short_5_words")
    return None if short is None else f"{short['cpu_over_whole']:.2f}x"


def _peer_long_sooner(r: Json) -> str | None:
    long = r["results"].get("long_50_words")
    return None if long is None else f"{long['compared']['peer_first_audio_over_ours']}x"


def _peer_paragraph_cpu(r: Json) -> str | None:
    paragraph = r["results"].get("paragraph_4_sentences")
    return None if paragraph is None else f"{paragraph['compared']['cpu_per_text_ours_over_peer']}x"


def _demo_ratio(r: Json) -> str | None:
    return f"{r['variants']['streaming']['batch_over_bidi_median_of_paired']}x"


@dataclass(frozen=True, slots=True)
class Measure:
    label: str
    goal: str
    files: str  # a key of FILES
    cell: Callable[[Json], str | None]


MEASURES = (
    Measure(
        "First audio p50 at the bidi route (5-50 words, digits, a paragraph)",
        "≤ 200 ms fast class, ≤ 400 ms AVX2",
        "route",
        _route_first_audio,
    ),
    Measure("Worst gap at the route, a listener in real time", "≤ 50 ms", "route", _route_worst_gap),
    Measure(
        "First audio p50 in the engine, paced (5, 50 words, digits, a paragraph)",
        "worst gap ≤ 50 ms",
        "engine",
        _engine_first_audio,
    ),
    Measure(
        "The floor: first audio of the plan's smallest first window, unpaced",
        "(no plan starts sooner)",
        "engine",
        _engine_floor,
    ),
    Measure("5 words: CPU over whole-sentence decoding", "≤ 1.05x", "engine", _engine_short_compute),
    Measure("50 words: first audio sooner than kokoro-onnx's", "≥ 10x", "peer", _peer_long_sooner),
    Measure("Paragraph: CPU over kokoro-onnx's", "≤ 1.0x", "peer", _peer_paragraph_cpu),
    Measure("`make demo`: batch / bidi first audio", "≥ 3.5x", "demo", _demo_ratio),
)


@dataclass(frozen=True, slots=True)
class Run:
    """One result file, and the whole-sentence RTF of the host that wrote it."""

    name: str
    report: Json
    rtf: float


def _runs_by_host(results: Path) -> dict[tuple[str, bool], dict[str, Run]]:
    """Each host's result file per `FILES` key (the newest listed where a host has several); a
    host is (its class, slower than real time)."""
    by_host: dict[tuple[str, bool], dict[str, Run]] = {}
    for key, names in FILES.items():
        for name in names:
            path = results / f"{name}.json"
            if not path.exists():
                continue
            report = json.loads(path.read_text())
            machine = report.get("machine") or {}
            host_class, rtf = machine.get("host_class"), machine.get("whole_sentence_rtf")
            if host_class is None or rtf is None:
                continue  # written before the host record
            host = (str(host_class), float(rtf) >= 1.0)
            by_host.setdefault(host, {})[key] = Run(name, report, float(rtf))
    return by_host


def _heading(host: tuple[str, bool], rtfs: list[float]) -> str:
    low, high = min(rtfs), max(rtfs)
    speed = f"RTF {low:.2f}" if f"{low:.2f}" == f"{high:.2f}" else f"RTF {low:.2f}–{high:.2f}"
    return f"{host[0]}, {speed}" + (" (slower than real time)" if host[1] else "")


def host_table(results: Path, table: Callable[[list[str], list[list[str]]], str]) -> str:
    """The measures' table, one column per host, and the file and command behind every column."""
    by_host = _runs_by_host(results)
    hosts = sorted(by_host, key=lambda host: min(run.rtf for run in by_host[host].values()))
    headings = [_heading(host, [run.rtf for run in by_host[host].values()]) for host in hosts]
    rows = []
    for measure in MEASURES:
        held = [by_host[host].get(measure.files) for host in hosts]
        cells = [(measure.cell(one.report) if one is not None else None) or "–" for one in held]
        rows.append([measure.label, measure.goal, *cells])
    sources = [
        f"{heading}: "
        + "; ".join(f"`{run.name}.json` (`{run.report.get('command', 'n/a')}`)" for run in by_host[host].values())
        for host, heading in zip(hosts, headings, strict=True)
    ]
    return "\n\n".join(
        [
            table(["measure", "goal", *headings], rows),
            "Each column's files and the commands that wrote them:\n\n" + "\n".join(f"- {line}" for line in sources),
        ]
    )
