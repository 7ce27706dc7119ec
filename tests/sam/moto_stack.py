"""Deploy the transformed template to moto's CloudFormation, as far as moto supports it.

moto's CloudFormation creates real moto resources (IAM roles with their inline policies, S3
buckets, the ECR repository, Lambda functions and layer, SageMaker model/config/endpoint, the
state machines with their substitutions applied) and resolves every Ref/GetAtt/Sub between them.
It has no model for a few types (function URL, alarms, auto scaling, CodeBuild, bucket
policies): those resources are left out, and a reference to one becomes the literal
"<not-in-moto:LogicalId>"; functions lose their Layers (moto keeps none it did not publish);
state machines lose their logging configuration and get their DefinitionSubstitutions applied
through Fn::Sub (moto ignores them).

moto's CloudFormation puts state machines in the Step Functions backend that does not execute
(docs/platform-facts.md#sam); `make_executable` copies them, same name and definition, into the one that does.
On a stack update, moto "updates" resources whose Condition is false (it never created them, and
crashes resolving them), and drops those of a type it cannot update (log groups); `create_stack`
installs a bridge that leaves both alone, as CloudFormation does.
What moto creates is otherwise exactly what the template says.
"""

from __future__ import annotations

import copy
import io
import json
import zipfile
from typing import Any

from moto.cloudformation.parsing import get_model_map

ARTIFACT_BUCKET = "packaged-artifacts"
CONTEXT_TOKEN = "@@CONTEXT-OBJECT@@"  # tests/sam/sam_transform.py points code URIs here


def unsupported_resources(template: dict[str, Any]) -> set[str]:
    supported = get_model_map()
    return {name for name, resource in template["Resources"].items() if resource["Type"] not in supported}


def prune_for_moto(template: dict[str, Any]) -> dict[str, Any]:
    """A copy of `template` without what moto cannot create, references to it made literal."""
    pruned = copy.deepcopy(template)
    dropped = unsupported_resources(pruned)
    for name in dropped:
        del pruned["Resources"][name]

    def literal(name: str) -> str:
        return f"<not-in-moto:{name}>"

    def rewrite(node: Any) -> Any:
        if isinstance(node, dict):
            if set(node) == {"Ref"} and node["Ref"] in dropped:
                return literal(node["Ref"])
            if set(node) == {"Fn::GetAtt"}:
                target = node["Fn::GetAtt"]
                name = target[0] if isinstance(target, list) else str(target).split(".", 1)[0]
                if name in dropped:
                    return literal(name)
            if set(node) == {"Fn::Sub"}:
                return {"Fn::Sub": rewrite_sub(node["Fn::Sub"])}
            return {key: rewrite(value) for key, value in node.items() if key != "DependsOn" or value}
        if isinstance(node, list):
            return [rewrite(item) for item in node]
        return node

    def rewrite_sub(value: Any) -> Any:
        if isinstance(value, str):
            for name in dropped:
                value = value.replace("${" + name + "}", literal(name))
                value = value.replace("${" + name + ".", "<not-in-moto:" + name + ".")
            return value
        text, variables = value
        return [rewrite_sub(text), rewrite(variables)]

    for resource in pruned["Resources"].values():
        if resource["Type"] == "AWS::StepFunctions::StateMachine":
            substitute_definition(resource["Properties"])
            # moto's state machines keep no logging configuration, and its stack update fails to
            # resolve the log group reference in it (test_template checks the configuration).
            resource["Properties"].pop("LoggingConfiguration", None)
        if resource["Type"] == "AWS::SageMaker::EndpointConfig":
            # moto's enum of instance types predates ml.c7i (and ml.g5): it gets ml.c5.xlarge in
            # place of a c7i type; the conditions and the model's environment see the real one.
            for variant in resource["Properties"]["ProductionVariants"]:
                if variant.get("InstanceType") == {"Ref": "InstanceType"}:
                    variant["InstanceType"] = {"Fn::If": ["CpuInstance", "ml.c5.xlarge", {"Ref": "InstanceType"}]}
                # Qwen3-TTS's types (g5, g6, g6e: bfloat16) are all outside moto's enum.
                if variant.get("InstanceType") == {"Ref": "Qwen3InstanceType"}:
                    variant["InstanceType"] = "ml.g4dn.xlarge"
        if resource["Type"] == "AWS::Lambda::Function":
            # moto drops layers it did not publish, and its stack update breaks on a layer Ref.
            resource["Properties"].pop("Layers", None)
        depends = resource.get("DependsOn")
        if isinstance(depends, list):
            resource["DependsOn"] = [name for name in depends if name not in dropped]
        elif isinstance(depends, str) and depends in dropped:
            del resource["DependsOn"]
    pruned["Resources"] = rewrite(pruned["Resources"])
    pruned["Outputs"] = rewrite(pruned.get("Outputs", {}))
    return pruned


def substitute_definition(properties: dict[str, Any]) -> None:
    """DefinitionSubstitutions as Fn::Sub with a variable map, which does the same and which moto
    resolves (its state machine ignores DefinitionSubstitutions)."""
    substitutions = properties.pop("DefinitionSubstitutions", None)
    if not substitutions:
        return
    definition = properties["DefinitionString"]
    if isinstance(definition, dict) and "Fn::Join" in definition:
        separator, parts = definition["Fn::Join"]
        assert all(isinstance(part, str) for part in parts), "the SAM transform inlines the ASL as text"
        definition = separator.join(parts)
    # moto's Fn::Sub runs string.Template, which would turn the ASL's "$$" (the context object)
    # into "$"; the token survives it and create_stack puts "$$" back.
    properties["DefinitionString"] = {"Fn::Sub": [definition.replace("$$", CONTEXT_TOKEN), substitutions]}


def restore_context_paths(account: str, region: str) -> None:
    from moto.stepfunctions.models import stepfunctions_backends

    for machine in stepfunctions_backends[account][region].state_machines:
        machine.definition = machine.definition.replace(CONTEXT_TOKEN, "$$")


def upload_artifacts(s3: Any, template: dict[str, Any]) -> None:
    """Put a small zip where each function's and layer's packaged code would be."""
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w") as bundle:
        bundle.writestr("app.py", "def handler(event, context):\n    return event\n")
    s3.create_bucket(Bucket=ARTIFACT_BUCKET)
    for resource in template["Resources"].values():
        code = resource.get("Properties", {}).get("Code") or resource.get("Properties", {}).get("Content")
        if isinstance(code, dict) and code.get("S3Bucket") == ARTIFACT_BUCKET:
            s3.put_object(Bucket=ARTIFACT_BUCKET, Key=code["S3Key"], Body=archive.getvalue())


def make_executable(account: str, region: str) -> None:
    """Copy the stack's state machines into moto's executing backend (mock_aws with
    `stepfunctions.execute_state_machine`), keeping their ARNs."""
    from moto.stepfunctions.models import stepfunctions_backends
    from moto.stepfunctions.parser.models import stepfunctions_parser_backends

    executing = stepfunctions_parser_backends[account][region]
    for machine in stepfunctions_backends[account][region].state_machines:
        executing.create_state_machine(machine.name, machine.definition, machine.roleArn)


def parameters(values: dict[str, str]) -> list[dict[str, str]]:
    return [{"ParameterKey": key, "ParameterValue": value} for key, value in values.items()]


def skip_false_conditions_on_update() -> None:
    """Make moto's stack update skip a resource whose Condition is false (idempotent)."""
    from moto.cloudformation import parsing

    update = parsing.parse_and_update_resource
    if getattr(update, "skips_false_conditions", False):
        return

    def bridged(logical_id: str, resource_json: dict[str, Any], resources_map: Any, **kwargs: Any) -> Any:
        condition = resource_json.get("Condition")
        if condition and not resources_map.lazy_condition_map[condition]:
            return None
        updated = update(logical_id, resource_json, resources_map, **kwargs)
        if updated is None:
            # A type moto cannot update (a log group): moto would drop it from the stack, and a
            # later GetAtt of it fails; CloudFormation updates it in place, so it stays.
            return resources_map._parsed_resources.get(logical_id)
        return updated

    bridged.skips_false_conditions = True  # type: ignore[attr-defined]
    parsing.parse_and_update_resource = bridged  # type: ignore[assignment]


def create_stack(cfn: Any, s3: Any, name: str, template: dict[str, Any], values: dict[str, str]) -> dict[str, Any]:
    """Create the stack in moto; its description (status, outputs)."""
    skip_false_conditions_on_update()
    pruned = prune_for_moto(template)
    upload_artifacts(s3, pruned)
    cfn.create_stack(
        StackName=name,
        TemplateBody=json.dumps(pruned),
        Parameters=parameters(values),
        Capabilities=["CAPABILITY_IAM", "CAPABILITY_AUTO_EXPAND"],
    )
    stack: dict[str, Any] = cfn.describe_stacks(StackName=name)["Stacks"][0]
    account = stack["StackId"].split(":")[4]
    restore_context_paths(account, cfn.meta.region_name)
    return stack
