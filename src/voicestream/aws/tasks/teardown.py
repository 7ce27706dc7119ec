"""The teardown state machine's steps: delete what bills, report what was already gone.

Every step is idempotent: a resource that no longer exists is a success ("already_gone"), so a
second run, or a run after a half-finished one, succeeds and says what it found. Anything else
raises `TeardownError` with a message that names the resource and what AWS said, which the
state machine turns into its failure cause. Throttling raises `ThrottledError` (retried there).

Two things AWS does that moto does not: SageMaker refuses to delete an endpoint under auto
scaling unless its scaling is deregistered (`deregister_scaling` runs first), and a delete that
is only allowed for resources tagged with the stack answers AccessDenied for a name that does
not exist (no resource, no tag): the step then asks Describe whether it is really gone.

The clients are plain boto3 clients (`voicestream.aws.clients.client`), passed in so that the
same code runs in Lambda and against moto in the tests.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any, Literal, TypedDict

from botocore.exceptions import ClientError

from voicestream.aws.clients import client as aws_client
from voicestream.aws.clients import error_code, error_message, raise_if_throttled
from voicestream.wire.errors import CodedError

Status = Literal["deleted", "deleting", "already_gone"]

# DeleteObjects takes at most 1000 keys, BatchDeleteImage at most 100 image ids.
S3_BATCH = 1000
ECR_BATCH = 100
# empty_bucket starts no new batch with less time than this left in the Lambda invocation.
TIME_RESERVE_S = 30.0


class TeardownError(CodedError):
    """A resource could not be deleted; the message says which and why."""

    code = "teardown_failed"


class ResourceResult(TypedDict):
    resource: str
    name: str
    status: Status


class EndpointState(TypedDict):
    name: str
    status: str  # "gone" or SageMaker's EndpointStatus
    failure_reason: str


class BucketResult(TypedDict):
    bucket: str
    done: bool
    already_gone: bool
    deleted_versions: int
    deleted_markers: int
    calls: int


class RepositoryResult(TypedDict):
    repository: str
    already_gone: bool
    deleted_images: int


class ScalingResult(TypedDict):
    endpoint: str
    scalable_targets: int  # variants deregistered from Application Auto Scaling
    scaling_policies: int  # policies deleted first


# Application Auto Scaling's names for a SageMaker variant's instance count.
SCALING_NAMESPACE = "sagemaker"
SCALING_DIMENSION = "sagemaker:variant:DesiredInstanceCount"
ACCESS_DENIED_CODES = frozenset({"AccessDeniedException", "AccessDenied"})


def _not_found(exc: ClientError) -> bool:
    # SageMaker answers ValidationException "Could not find endpoint/model/... '<arn>'".
    return error_code(exc) == "ValidationException" and "could not find" in error_message(exc).lower()


def _access_denied(exc: ClientError) -> bool:
    return error_code(exc) in ACCESS_DENIED_CODES


def _fail(what: str, exc: ClientError) -> TeardownError:
    raise_if_throttled(exc, what)
    return TeardownError(f"{what} failed: {error_code(exc) or type(exc).__name__}: {error_message(exc)}")


# -- SageMaker ---------------------------------------------------------------------------------


def describe_endpoint(sagemaker: Any, name: str) -> EndpointState:
    """The endpoint's status, or "gone" once SageMaker no longer knows it."""
    try:
        found = sagemaker.describe_endpoint(EndpointName=name)
    except ClientError as exc:
        if _not_found(exc):
            return {"name": name, "status": "gone", "failure_reason": ""}
        raise _fail(f"describing endpoint {name!r}", exc) from exc
    return {"name": name, "status": found["EndpointStatus"], "failure_reason": found.get("FailureReason", "")}


def delete_endpoint(sagemaker: Any, name: str) -> ResourceResult:
    """Start deleting the endpoint (SageMaker finishes asynchronously; poll `describe_endpoint`)."""
    try:
        sagemaker.delete_endpoint(EndpointName=name)
    except ClientError as exc:
        if _not_found(exc):
            return {"resource": "endpoint", "name": name, "status": "already_gone"}
        # A run that starts while an earlier one's deletion is still in progress.
        if describe_endpoint(sagemaker, name)["status"] in ("Deleting", "gone"):
            return {"resource": "endpoint", "name": name, "status": "deleting"}
        raise _fail(f"deleting endpoint {name!r}", exc) from exc
    return {"resource": "endpoint", "name": name, "status": "deleting"}


def _delete_once(
    resource: str, name: str, delete: Callable[[], object], describe: Callable[[], object]
) -> ResourceResult:
    """Run a synchronous SageMaker delete; "not found" means an earlier run already did it.

    AccessDenied is ambiguous under a tag-conditioned policy (a missing resource has no tag
    either): `describe` tells which. Absent: already gone. Present: the denial is real."""
    what = f"{resource.replace('_', ' ')} {name!r}"
    try:
        delete()
    except ClientError as exc:
        if _not_found(exc):
            return {"resource": resource, "name": name, "status": "already_gone"}
        if not _access_denied(exc):
            raise _fail(f"deleting {what}", exc) from exc
        try:
            describe()
        except ClientError as probe:
            if _not_found(probe):
                return {"resource": resource, "name": name, "status": "already_gone"}
            raise _fail(f"deleting {what} was denied ({error_message(exc)}) and describing it", probe) from probe
        raise TeardownError(
            f"deleting {what} was denied although it exists: {error_message(exc)} (the teardown may delete only "
            "what is tagged voicestream:stack with this stack's name)"
        ) from exc
    return {"resource": resource, "name": name, "status": "deleted"}


def delete_endpoint_config(sagemaker: Any, name: str) -> ResourceResult:
    return _delete_once(
        "endpoint_config",
        name,
        lambda: sagemaker.delete_endpoint_config(EndpointConfigName=name),
        lambda: sagemaker.describe_endpoint_config(EndpointConfigName=name),
    )


def delete_model(sagemaker: Any, name: str) -> ResourceResult:
    return _delete_once(
        "model",
        name,
        lambda: sagemaker.delete_model(ModelName=name),
        lambda: sagemaker.describe_model(ModelName=name),
    )


# -- Application Auto Scaling ------------------------------------------------------------------


def deregister_scaling(autoscaling: Any, endpoint: str) -> ScalingResult:
    """Delete the scaling policies of every variant of `endpoint`, then deregister the variants.

    SageMaker deletes an auto-scaled endpoint only when the caller may deregister its scaling,
    and a deregistered variant keeps its instances: so this runs before `delete_endpoint`.
    Nothing registered (a second run, an endpoint without scaling) is a success."""
    prefix = f"endpoint/{endpoint}/variant/"
    result: ScalingResult = {"endpoint": endpoint, "scalable_targets": 0, "scaling_policies": 0}
    try:
        targets = [
            target
            for page in autoscaling.get_paginator("describe_scalable_targets").paginate(
                ServiceNamespace=SCALING_NAMESPACE
            )
            for target in page.get("ScalableTargets", [])
            if target["ResourceId"].startswith(prefix) and target["ScalableDimension"] == SCALING_DIMENSION
        ]
    except ClientError as exc:
        raise _fail(f"listing the auto scaling of endpoint {endpoint!r}", exc) from exc
    for target in targets:
        resource_id = target["ResourceId"]
        scope = {
            "ServiceNamespace": SCALING_NAMESPACE,
            "ResourceId": resource_id,
            "ScalableDimension": SCALING_DIMENSION,
        }
        try:
            policies = [
                policy["PolicyName"]
                for page in autoscaling.get_paginator("describe_scaling_policies").paginate(**scope)
                for policy in page.get("ScalingPolicies", [])
            ]
            for policy in policies:
                if _scaling_call(autoscaling.delete_scaling_policy, PolicyName=policy, **scope):
                    result["scaling_policies"] += 1
            if _scaling_call(autoscaling.deregister_scalable_target, **scope):
                result["scalable_targets"] += 1
        except ClientError as exc:
            raise _fail(f"deregistering the auto scaling of {resource_id}", exc) from exc
    return result


def _scaling_call(call: Callable[..., object], **arguments: str) -> bool:
    """True when the call did it; False when it was already gone (a concurrent or earlier run)."""
    try:
        call(**arguments)
    except ClientError as exc:
        if error_code(exc) == "ObjectNotFoundException":
            return False
        raise
    return True


# -- S3 ----------------------------------------------------------------------------------------


def empty_bucket(
    s3: Any,
    bucket: str,
    *,
    max_batches: int = 0,
    totals: BucketResult | None = None,
    time_left_s: Callable[[], float] | None = None,
) -> BucketResult:
    """Delete every object version and delete marker, one listing page (≤1000) per batch.

    Stops with `done` False after `max_batches` batches (0 = no limit), or when `time_left_s()`
    drops below TIME_RESERVE_S, so the state machine calls again and a bucket of any size fits
    in Lambda's time limit. `totals` carries the counts of earlier calls forward. Each batch
    lists from the start: what was deleted is gone from the listing, so no marker is needed
    and concurrent changes cannot make us skip anything.
    """
    result: BucketResult = totals.copy() if totals else _empty_totals(bucket)
    result["bucket"], result["done"] = bucket, False
    result["calls"] += 1
    batches = 0
    while not max_batches or batches < max_batches:
        if batches and time_left_s is not None and time_left_s() < TIME_RESERVE_S:
            break
        try:
            page = s3.list_object_versions(Bucket=bucket, MaxKeys=S3_BATCH)
        except ClientError as exc:
            if error_code(exc) == "NoSuchBucket":
                result["done"] = result["already_gone"] = True
                return result
            raise _fail(f"listing object versions of s3://{bucket}", exc) from exc
        versions = [{"Key": v["Key"], "VersionId": v["VersionId"]} for v in page.get("Versions", [])]
        markers = [{"Key": m["Key"], "VersionId": m["VersionId"]} for m in page.get("DeleteMarkers", [])]
        if not versions and not markers:
            result["done"] = True
            return result
        _delete_objects(s3, bucket, versions + markers)
        result["deleted_versions"] += len(versions)
        result["deleted_markers"] += len(markers)
        batches += 1
        if not page.get("IsTruncated"):
            result["done"] = True
            return result
    return result


def _empty_totals(bucket: str) -> BucketResult:
    return {
        "bucket": bucket,
        "done": False,
        "already_gone": False,
        "deleted_versions": 0,
        "deleted_markers": 0,
        "calls": 0,
    }


def _delete_objects(s3: Any, bucket: str, objects: list[dict[str, str]]) -> None:
    try:
        answer = s3.delete_objects(Bucket=bucket, Delete={"Objects": objects, "Quiet": True})
    except ClientError as exc:
        raise _fail(f"deleting {len(objects)} object versions from s3://{bucket}", exc) from exc
    errors = answer.get("Errors", [])
    if errors:
        first = "; ".join(
            f"{e.get('Key')}@{e.get('VersionId')}: {e.get('Code')} {e.get('Message')}" for e in errors[:3]
        )
        raise TeardownError(f"s3://{bucket}: {len(errors)} of {len(objects)} deletions failed, e.g. {first}")


# -- ECR ---------------------------------------------------------------------------------------


def delete_images(ecr: Any, repository: str) -> RepositoryResult:
    """Delete every image of the repository, tagged or not (deleting a digest drops its tags)."""
    try:
        digests = sorted(set(_image_digests(ecr, repository)))
    except ClientError as exc:
        if error_code(exc) == "RepositoryNotFoundException":
            return {"repository": repository, "already_gone": True, "deleted_images": 0}
        raise _fail(f"listing images of ECR repository {repository!r}", exc) from exc
    deleted = 0
    for start in range(0, len(digests), ECR_BATCH):
        batch = [{"imageDigest": d} for d in digests[start : start + ECR_BATCH]]
        try:
            answer = ecr.batch_delete_image(repositoryName=repository, imageIds=batch)
        except ClientError as exc:
            raise _fail(f"deleting {len(batch)} images from ECR repository {repository!r}", exc) from exc
        # An image deleted meanwhile (ImageNotFound) is what we wanted anyway.
        failures = answer.get("failures", [])
        real = [f for f in failures if f.get("failureCode") != "ImageNotFound"]
        if real:
            first = "; ".join(f"{f.get('imageId')}: {f.get('failureCode')} {f.get('failureReason')}" for f in real[:3])
            raise TeardownError(f"ECR repository {repository!r}: {len(real)} images not deleted, e.g. {first}")
        deleted += len(batch) - len(failures)
    return {"repository": repository, "already_gone": False, "deleted_images": deleted}


def _image_digests(ecr: Any, repository: str) -> Iterator[str]:
    for page in ecr.get_paginator("list_images").paginate(repositoryName=repository):
        for image in page.get("imageIds", []):
            if "imageDigest" in image:
                yield image["imageDigest"]


# -- the Lambda task's entry -------------------------------------------------------------------


class Clients:
    """The boto3 clients the steps use, created on first use (a step needs one service)."""

    def __init__(self, region: str | None = None) -> None:
        self.region = region
        self._made: dict[str, Any] = {}

    def __getitem__(self, service: str) -> Any:
        if service not in self._made:
            self._made[service] = aws_client(service, self.region)
        return self._made[service]


def run_step(
    event: Mapping[str, Any], clients: Clients, time_left_s: Callable[[], float] | None = None
) -> Mapping[str, Any]:
    """One teardown step, chosen by `event["step"]`; the state machine passes names in the event.
    `time_left_s` is the invocation's remaining time (bounds how long a bucket is emptied)."""
    step = event.get("step")
    if step == "deregister_scaling":
        return deregister_scaling(clients["application-autoscaling"], _name(event, "endpoint_name"))
    if step == "delete_endpoint":
        return delete_endpoint(clients["sagemaker"], _name(event, "endpoint_name"))
    if step == "describe_endpoint":
        return describe_endpoint(clients["sagemaker"], _name(event, "endpoint_name"))
    if step == "delete_endpoint_config":
        return delete_endpoint_config(clients["sagemaker"], _name(event, "endpoint_config_name"))
    if step == "delete_model":
        return delete_model(clients["sagemaker"], _name(event, "model_name"))
    if step == "empty_bucket":
        totals = event.get("totals") or None
        return empty_bucket(
            clients["s3"],
            _name(event, "bucket"),
            max_batches=int(event.get("max_batches", 0)),
            totals=totals,
            time_left_s=time_left_s,
        )
    if step == "delete_images":
        return delete_images(clients["ecr"], _name(event, "repository"))
    raise TeardownError(f"unknown teardown step {step!r}")


def _name(event: Mapping[str, Any], key: str) -> str:
    value = event.get(key)
    if not isinstance(value, str) or not value:
        raise TeardownError(f"step {event.get('step')!r} needs a non-empty string {key!r}, got {value!r}")
    return value
