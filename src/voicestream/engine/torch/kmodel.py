"""kokoro's KModel without kokoro's pipeline: the model code alone.

`import kokoro` runs the package's __init__, which imports its KPipeline and with it misaki,
spaCy and phonemizer: G2P this project does in its own front end (engine/text/), over 100 MiB of
wheels that the prepared GPU check cannot take to a lent machine. KModel itself needs only
torch, transformers' ALBERT, huggingface_hub and loguru. So the package is registered bare (its
directory, not its __init__) and kokoro.model imported from it. Where kokoro was already
imported whole, that import is used as it is.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types
from typing import Any

from voicestream import env

REPO_ID = "hexgrad/Kokoro-82M"  # names the architecture for KModel; nothing is fetched from it


def import_kmodel() -> Any:
    """kokoro.model.KModel, offline (HF_HUB_OFFLINE: every file is passed explicitly, so a
    download attempt is a bug and fails at once instead of after ~25 s of retries)."""
    env.export("HF_HUB_OFFLINE", "1")  # huggingface_hub reads it when first imported
    if "kokoro" not in sys.modules:
        spec = importlib.util.find_spec("kokoro")
        if spec is None or not spec.submodule_search_locations:
            raise ImportError("kokoro is not installed: pip install 'voicestream[torch]'")
        package = types.ModuleType("kokoro")
        package.__path__ = list(spec.submodule_search_locations)
        package.__spec__ = spec
        sys.modules["kokoro"] = package
    # What kokoro's __init__ does: its debug lines would log every inference (loguru: kokoro's dependency).
    importlib.import_module("loguru").logger.disable("kokoro")
    return importlib.import_module("kokoro.model").KModel


def import_kpipeline() -> Any:
    """kokoro.pipeline.KPipeline (imports misaki): for tests that compare with kokoro's own pipeline."""
    import_kmodel()
    return importlib.import_module("kokoro.pipeline").KPipeline
