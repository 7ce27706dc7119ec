#!/bin/sh
# The Lambda handler under the Lambda Web Adapter (AWS_LAMBDA_EXEC_WRAPPER=/opt/bootstrap,
# AWS_LWA_INVOKE_MODE=response_stream): serve the app on $PORT, where the adapter forwards each
# invocation and streams our response back through the function URL. The adapter waits for
# AWS_LWA_READINESS_CHECK_PATH (/health) before the first invocation.
set -eu
cd "$(dirname "$0")"
export PATH="$PATH:${LAMBDA_TASK_ROOT:-.}/bin"
export PYTHONPATH="${PYTHONPATH:-}:/opt/python:${LAMBDA_RUNTIME_DIR:-}"
exec python3 -m uvicorn app:app \
    --host 127.0.0.1 --port "${PORT:-8080}" \
    --no-access-log --timeout-graceful-shutdown 2
