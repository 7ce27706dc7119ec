"""The IAM audit of one test: every recorded call checked against its role in the transformed template.

`IamAudit` is the `Gate` the recorder reports to. With `enforce`, a call the role does not allow
fails as AWS would fail it (AccessDenied), so the code's handling of that is exercised too;
`violations()` lists every refused check, with the call, the role and the reason.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from .actions import Authorization, authorizations
from .calls import ApiCall
from .policy import decide
from .stack import Stack


@dataclass(frozen=True)
class Violation:
    call: ApiCall
    role: str
    check: Authorization
    reason: str

    def __str__(self) -> str:
        context = f" with {dict(self.check.context)}" if self.check.context else ""
        return (
            f"{self.call.describe()} as {self.role}: {self.check.action} on {self.check.resource}{context}: "
            f"{self.reason}"
        )


@dataclass
class IamAudit:
    stack: Stack
    enforce: bool = True
    calls: list[ApiCall] = field(default_factory=list)
    machines: dict[str, str] = field(default_factory=dict)  # state machine ARN -> its ASL file's name
    refused: list[Violation] = field(default_factory=list)
    # Refused because the resource does not exist, so no tag condition can hold: AWS answers that
    # with AccessDenied too. The code must cope; the template is not at fault.
    refused_absent: list[Violation] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def check(self, call: ApiCall) -> list[Violation]:
        role = self.stack.role_of(call.principal)
        statements = self.stack.statements(role)
        found = []
        for check in authorizations(call, self.stack.where, self.stack.function_urls()):
            reason = decide(statements, check)
            if reason is not None:
                found.append(Violation(call, role, check, reason))
        return found

    def admit(self, call: ApiCall) -> str | None:
        with self._lock:
            self.calls.append(call)
        violations = self.check(call)
        if not violations:
            return None
        with self._lock:
            (self.refused_absent if call.resource_missing else self.refused).extend(violations)
        reason = f"(IAM audit) {violations[0]}"
        return reason if self.enforce else None

    def record(self, call: ApiCall) -> None:
        """A call observed after the fact (a state machine's task): checked, never refused."""
        self.enforce, enforce = False, self.enforce
        try:
            self.admit(call)
        finally:
            self.enforce = enforce

    def violations(self) -> list[Violation]:
        return list(self.refused)

    def actions_used(self) -> dict[str, set[str]]:
        """Role -> the actions its recorded calls needed (for reviewing what a role grants)."""
        used: dict[str, set[str]] = {}
        for call in self.calls:
            role = self.stack.role_of(call.principal)
            checks = authorizations(call, self.stack.where, self.stack.function_urls())
            used.setdefault(role, set()).update(check.action for check in checks)
        return used
