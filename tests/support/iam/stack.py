"""The transformed template as one deployed stack: its roles' policies with every intrinsic
function resolved, against the names the test actually used.

A test binds template expressions to the physical values it used (a state machine's
DefinitionSubstitutions, a function's environment): `ModelBucket: {"Ref": "ModelBucket"}` bound
to "voicestream-models-test" makes `${ModelBucket.Arn}/*` in a policy "arn:aws:s3:::voicestream-
models-test/*". Unbound resources get a stable made-up name, the same in the call and in the
policy. Which role a principal acts as comes from the template: a function's CodeUri, a state
machine's DefinitionUri.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tests.support.cfn_yaml import load_cfn_yaml

from .actions import Where

PSEUDO = {"AWS::Partition": "aws", "AWS::Region": "us-east-1", "AWS::AccountId": "123456789012",
          "AWS::StackName": "voicestream", "AWS::URLSuffix": "amazonaws.com"}  # fmt: skip
_SUB = re.compile(r"\$\{([^}!][^}]*)\}")
NAME_PROPERTIES = ("BucketName", "FunctionName", "RepositoryName", "LogGroupName", "EndpointName",
                   "ModelName", "EndpointConfigName", "StateMachineName", "RoleName")  # fmt: skip


class _NoValue:
    pass


NO_VALUE = _NoValue()


class Stack:
    def __init__(self, source: Path, transformed: dict[str, Any], parameters: Mapping[str, str]) -> None:
        self.source = load_cfn_yaml(source)
        self.template = transformed
        self.resources: dict[str, Any] = transformed["Resources"]
        self.parameters = {
            name: str(spec.get("Default", "")) for name, spec in transformed.get("Parameters", {}).items()
        }
        self.parameters.update(parameters)
        self.bound: dict[tuple[str, ...], str] = {}
        self.where = Where(PSEUDO["AWS::Partition"], PSEUDO["AWS::Region"], PSEUDO["AWS::AccountId"])

    # -- who acts as which role -------------------------------------------------------------------

    def role_of(self, principal: str) -> str:
        """The logical id of the role `function:<dir>`, `statemachine:<asl name>` or `speak` uses."""
        kind, _, name = principal.partition(":")
        if kind == "speak":
            kind, name = "function", "speak"
        for logical, resource in self.source["Resources"].items():
            properties = resource.get("Properties", {})
            if kind == "function" and str(properties.get("CodeUri", "")).rstrip("/") == f"functions/{name}":
                return self._role_target(logical)
            if kind == "statemachine" and Path(str(properties.get("DefinitionUri", ""))).name == f"{name}.asl.json":
                return self._role_target(logical)
        raise LookupError(f"no template resource runs as {principal}")

    def _role_target(self, logical: str) -> str:
        properties = self.resources[logical]["Properties"]
        role = properties.get("Role", properties.get("RoleArn"))  # Lambda | Step Functions
        if isinstance(role, dict) and "Fn::GetAtt" in role:
            return str(role["Fn::GetAtt"][0])
        raise LookupError(f"{logical} does not name its role with GetAtt: {role!r}")

    def statements(self, role: str) -> list[dict[str, Any]]:
        properties = self.resources[role]["Properties"]
        if properties.get("ManagedPolicyArns"):
            raise LookupError(f"{role} attaches managed policies: the audit reads inline policies only")
        rendered = []
        for policy in properties.get("Policies", []):
            for statement in policy["PolicyDocument"]["Statement"]:
                value = self.render(statement)
                if value is not NO_VALUE:
                    rendered.append(value)
        return rendered

    # -- bindings ---------------------------------------------------------------------------------

    def bind(self, expression: Any, value: str) -> None:
        """Make `expression` (as the template writes it) resolve to `value`."""
        if isinstance(expression, str):
            return  # a literal (e.g. the not-deployed placeholder): nothing to learn
        if "Fn::If" in expression:
            condition, yes, no = expression["Fn::If"]
            self.bind(yes if self.condition(condition) else no, value)
            return
        if "Ref" in expression:
            key: tuple[str, ...] = ("Ref", expression["Ref"])
        elif "Fn::GetAtt" in expression:
            logical, attribute = _getatt(expression["Fn::GetAtt"])
            key = ("GetAtt", logical, attribute)
        else:
            return  # Sub/Join: not invertible, and not needed
        if key[:2] == ("Ref", key[1]) and key[1] in self.parameters and key[1] not in self.resources:
            self._bind_parameter(key[1], value)
            return
        previous = self.bound.setdefault(key, value)
        if previous != value:
            raise ValueError(f"{'.'.join(key[1:])} is bound to both {previous!r} and {value!r} in one test")

    def _bind_parameter(self, name: str, value: str) -> None:
        key = ("Param", name)
        previous = self.bound.setdefault(key, value)
        if previous != value:
            raise ValueError(f"parameter {name} is bound to both {previous!r} and {value!r} in one test")

    def bind_substitutions(self, machine: str, substitutions: Mapping[str, str]) -> None:
        """A state machine created from statemachines/<machine>.asl.json with these substitutions."""
        logical = next(
            name
            for name, resource in self.source["Resources"].items()
            if Path(str(resource.get("Properties", {}).get("DefinitionUri", ""))).name == f"{machine}.asl.json"
        )
        declared = self.resources[logical]["Properties"].get("DefinitionSubstitutions", {})
        for key, value in substitutions.items():
            if key in declared:
                self.bind(declared[key], value)

    def bind_environment(self, function: str, variables: Mapping[str, str]) -> None:
        """A function run with these environment variables (those the template sets are bound)."""
        declared = self.resources[function]["Properties"].get("Environment", {}).get("Variables", {})
        for key, value in variables.items():
            if key in declared:
                self.bind(declared[key], value)

    def function_urls(self) -> dict[str, str]:
        """Function URL -> ARN of the function behind it, for the URLs this test bound."""
        urls = {}
        for logical, resource in self.resources.items():
            if resource["Type"] == "AWS::Lambda::Url":
                url = self.bound.get(("GetAtt", logical, "FunctionUrl"))
                if url is not None:
                    target = self.render(resource["Properties"]["TargetFunctionArn"])
                    urls[url] = (
                        target if str(target).startswith("arn:") else self._arn_of(str(target), "AWS::Lambda::Function")
                    )
        return urls

    # -- rendering --------------------------------------------------------------------------------

    def parameter(self, name: str) -> str:
        return self.bound.get(("Param", name), self.parameters[name])

    def condition(self, name: str) -> bool:
        return bool(self._value(self.template["Conditions"][name]))

    def render(self, node: Any) -> Any:
        if isinstance(node, list):
            return [item for item in (self.render(v) for v in node) if item is not NO_VALUE]
        if not isinstance(node, dict):
            return node
        if len(node) == 1:
            (key,) = node
            if key == "Ref" or key.startswith("Fn::"):
                return self._value(node)
        return {k: r for k, r in ((k, self.render(v)) for k, v in node.items()) if r is not NO_VALUE}

    def _value(self, node: Any) -> Any:
        if not isinstance(node, dict):
            return node
        ((key, argument),) = node.items()
        if key == "Ref":
            return self._ref(argument)
        if key == "Fn::GetAtt":
            return self._getatt(*_getatt(argument))
        if key == "Fn::Sub":
            text, variables = (argument, {}) if isinstance(argument, str) else argument
            local = {name: self.render(value) for name, value in variables.items()}
            return _SUB.sub(
                lambda m: str(local[m.group(1)] if m.group(1) in local else self._sub_name(m.group(1))), text
            )
        if key == "Fn::If":
            name, yes, no = argument
            return self.render(yes if self.condition(name) else no)
        if key == "Fn::Equals":
            left, right = (self.render(a) for a in argument)
            return str(left) == str(right)
        if key == "Fn::Not":
            return not self._value(argument[0])
        if key == "Fn::And":
            return all(self._value(a) for a in argument)
        if key == "Fn::Or":
            return any(self._value(a) for a in argument)
        if key == "Condition":
            return self.condition(argument)
        if key == "Fn::Join":
            separator, parts = argument
            return separator.join(str(self.render(p)) for p in parts)
        if key == "Fn::FindInMap":
            mapping, first, second = (str(self.render(a)) for a in argument)
            return self.template["Mappings"][mapping][first][second]
        raise ValueError(f"intrinsic function {key} is not supported by the IAM audit")

    def _sub_name(self, name: str) -> str:
        if "." in name:
            logical, attribute = name.split(".", 1)
            return str(self._getatt(logical, attribute))
        return str(self._ref(name))

    def _ref(self, name: str) -> Any:
        if name == "AWS::NoValue":
            return NO_VALUE
        if name in PSEUDO:
            return PSEUDO[name]
        if name in self.parameters and name not in self.resources:
            return self.parameter(name)
        if ("Ref", name) in self.bound:
            return self.bound[("Ref", name)]
        properties = self.resources[name].get("Properties", {})
        for key in NAME_PROPERTIES:
            if key in properties:
                return self.render(properties[key])
        return f"{PSEUDO['AWS::StackName']}-{name.lower()}"

    def _getatt(self, logical: str, attribute: str) -> Any:
        if ("GetAtt", logical, attribute) in self.bound:
            return self.bound[("GetAtt", logical, attribute)]
        kind = self.resources[logical]["Type"]
        if attribute == "Arn":
            return self._arn_of(str(self._ref(logical)), kind)
        if attribute in NAME_PROPERTIES:
            return self._ref(logical)
        return f"{logical}.{attribute}"

    def _arn_of(self, name: str, kind: str) -> str:
        where = self.where
        arns = {
            "AWS::S3::Bucket": lambda: f"arn:{where.partition}:s3:::{name}",
            "AWS::Lambda::Function": lambda: where.arn("lambda", f"function:{name}"),
            "AWS::ECR::Repository": lambda: where.arn("ecr", f"repository/{name}"),
            "AWS::Logs::LogGroup": lambda: where.arn("logs", f"log-group:{name}:*"),
            "AWS::IAM::Role": lambda: where.arn("iam", f"role/{name}", region=False),
            "AWS::StepFunctions::StateMachine": lambda: where.arn("states", f"stateMachine:{name}"),
        }
        if kind not in arns:
            raise ValueError(f"no ARN known for a {kind}")
        return arns[kind]()


def _getatt(argument: Any) -> tuple[str, str]:
    logical, attribute = argument if isinstance(argument, list) else str(argument).split(".", 1)
    return str(logical), str(attribute)
