"""CloudFormation's template Rules, evaluated offline for a parameter set.

CloudFormation checks Rules before it creates a change set; nothing here can call it. This
evaluates the rule functions the template uses (Fn::Equals, Fn::Not, Fn::And, Fn::Or,
Fn::Contains, Ref of a parameter) with CloudFormation's semantics: parameter values compare as
strings; a rule applies when it has no RuleCondition or its RuleCondition holds; every
Assertion of an applying rule must hold. Any other function raises, so a rule this cannot
evaluate fails its test instead of passing it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def _value(node: Any, parameters: Mapping[str, str]) -> Any:
    if isinstance(node, list):
        return [_value(item, parameters) for item in node]
    if not isinstance(node, dict):
        return str(node)
    ((function, argument),) = node.items()
    if function == "Ref":
        return parameters[argument]
    if function == "Fn::Equals":
        left, right = _value(argument, parameters)
        return left == right
    if function == "Fn::Not":
        return not _value(argument[0], parameters)
    if function == "Fn::And":
        return all(_value(item, parameters) for item in argument)
    if function == "Fn::Or":
        return any(_value(item, parameters) for item in argument)
    if function == "Fn::Contains":
        values, value = _value(argument, parameters)
        return value in values
    raise ValueError(f"rule function {function} is not evaluated here")


def failed_assertions(template: Mapping[str, Any], values: Mapping[str, str]) -> list[str]:
    """The AssertDescription of every assertion the parameter values break (defaults fill the rest)."""
    parameters = {name: str(spec.get("Default", "")) for name, spec in template["Parameters"].items()}
    parameters.update(values)
    failed = []
    for name, rule in template.get("Rules", {}).items():
        condition = rule.get("RuleCondition")
        if condition is not None and not _value(condition, parameters):
            continue
        for assertion in rule["Assertions"]:
            if not _value(assertion["Assert"], parameters):
                failed.append(f"{name}: {assertion.get('AssertDescription', '')}")
    return failed
