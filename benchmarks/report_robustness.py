"""REPORT.md's sections for issue 17 (benchmarks/soak.py, memory.py, robustness.py): rendered by
report.py like every other section; kept here so that report.py only lists them.

Each function takes the report (for `head`, `image`, `sections`, `load`) and its JSON.
"""

from __future__ import annotations

from typing import Any, Protocol

Json = dict[str, Any]


class Page(Protocol):
    sections: list[str]

    def head(self, row: list[str]) -> None: ...

    def image(self, filename: str, alt: str) -> str: ...

    def load(self, name: str) -> Json | None: ...


def _table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in rows])


def _yes(condition: bool) -> str:
    return "**yes**" if condition else "**no**"


def _ms(value: float | None) -> str:
    return "n/a" if value is None else (f"{value:,.0f} ms" if abs(value) >= 100 else f"{value:.1f} ms")


def _command(report: Json) -> str:
    return f"Command: `{report.get('command', 'n/a')}` (started {report.get('started', 'n/a')})."


def soak(page: Page, r: Json) -> None:
    flat = r["flatness"]
    unexpected = r["unexpected"]
    ok = bool(flat["flat"]) and flat["tasks_end"] <= flat["tasks_start"] and not unexpected
    page.head(
        [
            f"15. Soak, {r['sessions']} sessions (normal, dropped, blend churn, hostile, long): memory flat",
            "not measured",
            "idle RSS ≤ +5% after warm-up; tasks back to start; every outcome as expected",
            f"**{flat['growth_after_warm_up_pct']:+.1f}%** ({flat['rss_after_warm_up_mib']:.0f} → "
            f"{flat['rss_end_mib']:.0f} MiB), tasks {flat['tasks_start']} → {flat['tasks_end']}, "
            f"{len(unexpected)} unexpected, {r['wall_s']:.0f} s",
            _yes(ok),
        ]
    )
    rows = [
        [kind, ", ".join(f"{outcome}: {count}" for outcome, count in sorted(outcomes.items()))]
        for kind, outcomes in sorted(r["outcomes"].items())
    ]
    page.sections.append(
        "\n\n".join(
            [
                "## 15. Soak: memory and tasks over many sessions",
                f"{r['sessions']} sessions, {r['concurrency']} at a time, against the in-process server (real model, "
                "real sockets; the clients share its process): short sentences spoken to the end, sessions dropped "
                "(TCP abort) at their first audio frame, short sentences in a voice blend no session used before, "
                "hostile texts (`'9' * 2000`, one letter with 1,999 accents, `'a-' * 150`) and 450-character "
                "sentences (one ~500-phoneme piece each, the arena's largest). They run in ten rounds; after each, "
                "once the server is idle, RSS and the server loop's asyncio tasks are sampled (the light line: "
                "samples under load, which catch syntheses at their peak). The warm-up round first speaks in "
                f"{r.get('prefill_blends', 0)} distinct blends, so the bounded blend cache is full before memory is "
                f"judged. Memory flat: idle RSS at the end (median of the last three idle samples) is at most "
                f"{flat['goal_pct']:g}% above idle RSS after the warm-up (the worst idle sample: "
                f"{flat.get('worst_idle_growth_pct', float('nan')):+.1f}%). G2P processes "
                f"(proportional set size): {flat['g2p_processes_pss_start_mib']:.0f} → "
                f"{flat['g2p_processes_pss_end_mib']:.0f} MiB. Wall time {r['wall_s']:.0f} s.",
                _table(["kind", "outcomes"], rows),
                "Unexpected outcomes: " + ("none." if not unexpected else "; ".join(unexpected[:10])),
                page.image("soak_memory.png", "RSS and tasks over the soak"),
                _command(r),
            ]
        )
    )


def memory(page: Page, r: Json) -> None:
    configs = r["configs"]
    chosen, default = configs[r["chosen"]], configs["default_arena"]
    rtf = r["rtf_vs_default_arena"][r["chosen"]]
    page.head(
        [
            "16. RSS kept after long inputs: default arena → " + r["chosen"].replace("_", " "),
            "issue 17: 420 → 670 MB, kept",
            "near the baseline; real-time factor not materially worse",
            f"+{default['rss_kept_mib']:.0f} MiB → **+{chosen['rss_kept_mib']:.0f} MiB**; RTF ×{rtf}",
            _yes(chosen["rss_kept_mib"] < 0.1 * chosen["rss_baseline_mib"] and rtf is not None and rtf <= 1.1),
        ]
    )
    rows = [
        [
            f"`{name}`" + (" (chosen)" if name == r["chosen"] else ""),
            f"{config['rss_baseline_mib']:.0f} MiB",
            f"{config['rss_peak_mib']:.0f} MiB",
            f"{config['rss_after_mib']:.0f} MiB",
            f"+{config['rss_kept_mib']:.0f} MiB",
            f"{config['rtf_medium']}",
            f"{r['rtf_vs_default_arena'][name]}",
        ]
        for name, config in configs.items()
    ]
    page.sections.append(
        "\n\n".join(
            [
                "## 16. Memory after long inputs: onnxruntime's arena",
                "Each setting in a fresh process on the real model: RSS after short warm-up inputs (baseline), "
                "its peak over three 503-phoneme inputs, RSS after short inputs again, and the real-time factor "
                f"of a medium sentence (medians of {r['repeats']} repeats, settings rotated). The engine uses the "
                "chosen one (`voicestream.engine.onnx.ort_options`).",
                _table(["setting", "baseline", "peak", "after", "kept", "RTF (medium)", "RTF / default"], rows),
                _command(r),
            ]
        )
    )


def robustness(page: Page, r: Json) -> None:
    before = page.load("robustness_before")
    label = "before the fix" if before else "before: not measured"

    def contended(report: Json | None, name: str) -> str:
        if report is None:
            return "n/a"
        iso = report["isolation"][name]
        alone, busy = iso["b_first_audio_alone_ms"]["median"], iso["b_first_audio_contended_ms"]["median"]
        return f"{_ms(busy)} vs {_ms(alone)} alone (×{iso['contended_over_alone']['median']})"

    for name, what in (("accents", "'a' + 1,999 accents"), ("dashes", "'a-' * 150")):
        after_ratio = r["isolation"][name]["contended_over_alone"]["median"]
        page.head(
            [
                f"17. Another session's first audio while {what} sits in G2P",
                f"{label}: {contended(before, name)}",
                "not held up by another session's G2P (≤ 3x: it only shares the 2 cores with it)",
                contended(r, name),
                _yes(after_ratio is not None and after_ratio <= 3.0),
            ]
        )

    def work(report: Json | None, name: str) -> str:
        if report is None:
            return "n/a"
        w = report["work"][name]
        if w.get("status") is None:
            return f"no answer within the cap ({w.get('note', '')})"
        if w["status"] != 200:
            return f"{w['status']} `{w.get('code')}` in {_ms(w['answer_ms'])}"
        done = "complete" if w.get("completed") else "still streaming at the cap"
        return f"200, {w.get('audio_s', 0)} s of audio in {_ms(w['total_ms'])} ({done})"

    page.head(
        [
            "17. POST /invocations `'9' * 2000` (inside the 2,000-character limit)",
            f"{label}: {work(before, 'nines_2000')}",
            "bounded work: refused at once, coded",
            work(r, "nines_2000"),
            _yes(r["work"]["nines_2000"].get("code") == "text_too_complex"),
        ]
    )
    blends_after = r["blends"]["rss_growth_mib"]
    blends_before = "n/a" if before is None else f"+{before['blends']['rss_growth_mib']:.0f} MiB"
    page.head(
        [
            "17. RSS after 500 distinct voice blends",
            f"{label}: {blends_before} (issue: +247 MB)",
            "bounded (LRU of 32 tables, 16 MiB)",
            f"+{blends_after:.0f} MiB",
            _yes(blends_after <= 20),
        ]
    )
    rows = []
    for name in r["work"]:
        rows.append([f"`{name}`", work(before, name), work(r, name)])
    iso_rows = [[name, contended(before, name), contended(r, name)] for name in r["isolation"]]
    page.sections.append(
        "\n\n".join(
            [
                "## 17. Hostile input: bounded work, isolated G2P, bounded blends (issue 17)",
                "The same script against the same in-process server, on the code before the fix "
                "(`robustness_before.json`, run with that checkout's `src` on PYTHONPATH) and after "
                "(`robustness.json`). Work: long digit runs on POST /invocations, capped at "
                f"{r.get('cap_s', 60)} s on the client. Isolation: session B says “Hello there.” alone, then "
                "while session A's text sits in G2P; B's time to first audio, medians of "
                f"{r['repeats']} repeats, and the median of per-repeat ratios.",
                _table(["long number", "before", "after"], rows),
                _table(["A's text", "before: B contended vs alone", "after"], iso_rows),
                f"Blends: 500 distinct blend strings' tables built in the server process: RSS {blends_before} "
                f"before, +{blends_after:.0f} MiB after.",
                _command(r) + ("" if before is None else f" Before: `{before.get('command', 'n/a')}`."),
            ]
        )
    )


HOSTILE_RATIO_GOAL = 3.0  # others' first audio: at most this many times their first audio alone
HOSTILE_RSS_GOAL_MIB = 20.0  # RSS after a case, once idle, above RSS before it


def hostile(page: Page, r: Json) -> None:
    """Issue 32's abuse cases (robustness.py's `hostile`): one headline row for all, a table."""
    rows_in = r.get("hostile")
    if not rows_in:
        return
    run = r.get("reruns", {}).get("hostile", r)  # the run that measured these rows (robustness.py --only)
    ratios = {name: row["others_first_audio_ratio"] for name, row in rows_in.items()}
    growth = {name: row["rss_growth_mib"] for name, row in rows_in.items()}
    worst_ratio = max(ratios, key=lambda name: ratios[name] or float("inf"))
    worst_growth = max(growth, key=lambda name: growth[name])
    ended = all(row["ended_by_server"] and row["connections_after"] == 0 for row in rows_in.values())
    served = all(row["b_first_audio_contended_ms"].get("n") == run["repeats"] for row in rows_in.values())
    door = {name: value for name, value in ratios.items() if not rows_in[name].get("asks_for_synthesis")}
    worst_door = max(door, key=lambda name: door[name] or float("inf")) if door else None
    met = (
        ended
        and served
        and all(value is not None and value <= HOSTILE_RATIO_GOAL for value in door.values())
        and all(value <= HOSTILE_RSS_GOAL_MIB for value in growth.values())
    )
    door_text = "n/a" if worst_door is None else f"×{door[worst_door]} ({worst_door})"
    page.head(
        [
            f"17a. Hostile clients, {len(rows_in)} cases (issue 32): others served, RSS bounded",
            "not measured",
            f"B served in every case; refused-at-the-door cases ≤ {HOSTILE_RATIO_GOAL:g}x B's first audio alone; "
            f"RSS growth ≤ {HOSTILE_RSS_GOAL_MIB:g} MiB; every hostile client ended by the server",
            f"door cases worst {door_text}, all cases worst ×{ratios[worst_ratio]} ({worst_ratio}); "
            f"RSS worst {growth[worst_growth]:+.1f} MiB ({worst_growth}); ended: {'all' if ended else 'not all'}",
            _yes(met),
        ]
    )
    rows = [
        [
            f"`{name}`" + (" *" if row.get("asks_for_synthesis") else ""),
            row["what"],
            f"{_ms(row['b_first_audio_contended_ms'].get('median'))} vs "
            f"{_ms(row['b_first_audio_alone_ms'].get('median'))} (×{row['others_first_audio_ratio']})",
            f"{row['rss_growth_mib']:+.1f} MiB (peak {row['rss_peak_mib'] - row['rss_before_mib']:+.1f})",
            ", ".join(f"{end}: {count}" for end, count in row["client_ends"].items()) or "—",
            ", ".join(f"`{event}` {count}" for event, count in row["server_events"].items() if _notable(event)) or "—",
            f"{row['case_s']:.0f} s, {row['connections_after']} left",
        ]
        for name, row in rows_in.items()
    ]
    limits = r.get("hostile_limits", {})
    page.sections.append(
        "\n\n".join(
            [
                "## 17a. Hostile clients: the server goes on serving others, memory bounded (issue 32)",
                "Each case's clients (benchmarks/hostile.py) do their harm on real sockets against the in-process "
                "server while session B says “Hello there.”; B's first audio is compared with B alone just before "
                f"(medians of {run['repeats']}). RSS is the server process's (the clients share it), before the case "
                "and once idle after it; the server's log events during the case are counted by name "
                "(`event:code`). The server ran with a "
                f"{r.get('server_send_buffer_bytes', 0) // 1024} KiB kernel send buffer per connection and "
                + ", ".join(f"`{key}` = {value:g}" for key, value in limits.items())
                + " so each case ends within seconds; a connection being closed that does not drain is reset "
                "after 5 s. Cases marked * ask for audio: B shares the synthesis workers and the cores with "
                "them like with any caller, so its first audio is slower by their share; the others are refused "
                "at the door." + _warm_up_text(r.get("hostile_warm_up")),
                _table(
                    [
                        "case",
                        "clients",
                        "B's first audio: during vs alone",
                        "RSS after (peak)",
                        "how the clients ended",
                        "server log",
                        "case, connections left",
                    ],
                    rows,
                ),
                _command(run),
            ]
        )
    )


def _warm_up_text(warm_up: Json | None) -> str:
    """What the server took on before the first case (robustness.py's `warm_up`): first use."""
    if not warm_up:
        return ""
    return (
        f" Before the first case, {warm_up['callers']} callers heard the cases' long text "
        f"({warm_up['text_chars']} characters) in full at once (RSS {warm_up['rss_before_mib']:.0f} MiB "
        f"before, {warm_up['rss_after_mib']:.0f} MiB once idle after): what a server takes on at its first "
        "concurrent long syntheses is first use, not growth a hostile client causes."
    )


def _notable(event: str) -> bool:
    """The log events that say how a hostile client was handled (not every request's routine)."""
    return event.split(":", 1)[0] not in _ROUTINE_EVENTS


_ROUTINE_EVENTS = frozenset(
    {"invocation", "invocation_done", "openai_speech", "openai_speech_done", "request_queued", "request_done"}
    | {"session_open", "session_end", "close_requested"}
)
