"""IAM's evaluation of identity-based policies, for one account: explicit Deny wins, then any Allow.

Statements hold rendered strings (no intrinsic functions). Supported: Action/NotAction,
Resource/NotResource with `*` and `?`, and the condition operators the template uses (the
String, Arn and Bool families, with IfExists). Anything else raises, so an unsupported policy
fails the audit instead of passing it.
"""

from __future__ import annotations

import fnmatch
import functools
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .actions import Authorization


class UnsupportedPolicy(ValueError):
    pass


@functools.cache
def _glob(pattern: str, ignore_case: bool) -> re.Pattern[str]:
    if "${" in pattern:
        raise UnsupportedPolicy(f"policy variable in {pattern!r}")
    return re.compile(fnmatch.translate(pattern), re.IGNORECASE if ignore_case else 0)


# operator -> (test of one value against one pattern, negated?)
STRING_OPERATORS: dict[str, tuple[Callable[[str, str], bool], bool]] = {
    "StringEquals": (lambda value, pattern: value == pattern, False),
    "StringNotEquals": (lambda value, pattern: value == pattern, True),
    "StringEqualsIgnoreCase": (lambda value, pattern: value.lower() == pattern.lower(), False),
    "StringLike": (lambda value, pattern: _glob(pattern, False).fullmatch(value) is not None, False),
    "StringNotLike": (lambda value, pattern: _glob(pattern, False).fullmatch(value) is not None, True),
    "ArnEquals": (lambda value, pattern: value == pattern, False),
    "ArnLike": (lambda value, pattern: _glob(pattern, False).fullmatch(value) is not None, False),
    "Bool": (lambda value, pattern: value.lower() == pattern.lower(), False),
}


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _matches_any(patterns: Sequence[str], value: str, ignore_case: bool) -> bool:
    return any(_glob(pattern, ignore_case).fullmatch(value) for pattern in patterns)


def _condition_holds(operator: str, key: str, expected: Any, context: Mapping[str, str]) -> bool:
    base, if_exists = (operator[: -len("IfExists")], True) if operator.endswith("IfExists") else (operator, False)
    if base not in STRING_OPERATORS:
        raise UnsupportedPolicy(f"condition operator {operator}")
    test, negated = STRING_OPERATORS[base]
    value = context.get(key)
    if value is None:
        return if_exists or negated
    hit = any(test(value, str(pattern)) for pattern in _as_list(expected))
    return not hit if negated else hit


def statement_applies(statement: Mapping[str, Any], check: Authorization) -> bool:
    if "Action" in statement:
        action_ok = _matches_any(_as_list(statement["Action"]), check.action, True)
    else:
        action_ok = not _matches_any(_as_list(statement["NotAction"]), check.action, True)
    if not action_ok:
        return False
    if "Resource" in statement:
        resource_ok = _matches_any(_as_list(statement["Resource"]), check.resource, False)
    else:
        resource_ok = not _matches_any(_as_list(statement["NotResource"]), check.resource, False)
    if not resource_ok:
        return False
    for operator, keys in statement.get("Condition", {}).items():
        for key, expected in keys.items():
            if not _condition_holds(operator, key, expected, check.context):
                return False
    return True


def decide(statements: Sequence[Mapping[str, Any]], check: Authorization) -> str | None:
    """None when the statements allow the check, else why not."""
    applying = [s for s in statements if statement_applies(s, check)]
    denied = [s for s in applying if s["Effect"] == "Deny"]
    if denied:
        return f"explicitly denied by statement {denied[0].get('Sid', '?')}"
    if any(s["Effect"] == "Allow" for s in applying):
        return None
    near = [s.get("Sid", "?") for s in statements if _matches_any(_as_list(s.get("Action", [])), check.action, True)]
    hint = f" (statements {near} name the action but not this resource or context)" if near else ""
    return f"no statement allows {check.action} on {check.resource}{hint}"
