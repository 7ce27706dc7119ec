# The CPU image's base: Debian bookworm with its Python in a virtual environment, `python` and
# `pip` on PATH, as container/Dockerfile expects of BASE_IMAGE.
#
# DEBIAN_IMAGE: a Debian bookworm image; container/local/debian-image builds one with no
# registry, and debian:bookworm-slim from Docker Hub works as well.
#
# Python: bookworm's own python3 (3.11). The server image needs the package's engine extra
# only, which supports 3.11 (requires-python >= 3.11; the torch test tier runs on 3.11 too).
# The 3.12 requirement is the serverless side's (the Lambda runtime, the SageMaker HTTP/2
# client), which is not in this image. A distribution package keeps the base reproducible
# from the Debian mirror alone.
ARG DEBIAN_IMAGE=local/debian:bookworm
FROM ${DEBIAN_IMAGE}

# hadolint ignore=DL3008
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
         ca-certificates python3 python3-venv \
    && rm -rf /var/lib/apt/lists/* \
    && python3 -m venv /opt/venv

# PIP_CERT: the system store (with any CA the Debian image added) rather than pip's own bundle.
ENV PATH=/opt/venv/bin:$PATH \
    LANG=C.UTF-8 \
    PIP_CERT=/etc/ssl/certs/ca-certificates.crt
