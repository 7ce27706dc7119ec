"""Shipping voicestream to AWS: `voicestream deploy | validate | benchmark | destroy`.

deploy runs six steps, each idempotent, so a failed or interrupted deploy resumes where it
stopped when run again:

1. stack      `sam build` + `sam deploy`: repository, buckets, functions, state machines
2. outputs    read the stack's outputs (bucket, repository, state machine ARNs)
3. model      hexgrad/Kokoro-82M at a pinned revision from Hugging Face, verified against the
              hub's LFS sha256 (and a pinned checkpoint digest), into the model bucket
4. image      the server image, tagged by a hash of its build context: local Docker, or the
              stack's CodeBuild project when there is no Docker
5. endpoint   the stack's ImageTag/ModelDataPrefix parameters set: CloudFormation creates the
              SageMaker model, endpoint config, endpoint and its auto scaling
6. validate   the deploy-validate state machine; its report is printed

destroy runs the teardown state machine (endpoint, buckets, images), then `sam delete`.
Every AWS call goes through boto3 clients passed in, so the same code runs against moto.
"""

from voicestream.aws.deploy.errors import DeployError

__all__ = ["DeployError"]
