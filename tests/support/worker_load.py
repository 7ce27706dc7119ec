"""Where a parallel tier's time went, per pytest-xdist worker and per module: printed at the end
of the run, so a CI log shows whether one worker finished its modules long before the other.

Only the controller sees every worker's reports (each carries `node`, the worker that ran it);
a run without workers prints nothing."""

from __future__ import annotations

from collections import defaultdict

import pytest

HEAVIEST_MODULES = 12

_busy_s: dict[str, float] = defaultdict(float)
_module_s: dict[tuple[str, str], float] = defaultdict(float)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    node = getattr(report, "node", None)
    if node is None:
        return
    worker = str(node.gateway.id)
    _busy_s[worker] += report.duration
    _module_s[(report.nodeid.split("::")[0], worker)] += report.duration


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not _busy_s:
        return
    terminalreporter.section("time per worker (setup + call + teardown)")
    for worker, busy in sorted(_busy_s.items()):
        modules = sum(1 for _module, ran_on in _module_s if ran_on == worker)
        terminalreporter.write_line(f"{worker}: {busy:7.0f} s over {modules} modules")
    heaviest = sorted(_module_s.items(), key=lambda item: -item[1])[:HEAVIEST_MODULES]
    for (module, worker), seconds in heaviest:
        terminalreporter.write_line(f"{seconds:7.0f} s  {worker}  {module}")
