"""The Python examples in README.md and docs/ name voicestream's API as it is.

An example a reader copies must at least import: every block parses, and every name it imports
from voicestream exists. The plugin examples import frameworks this environment does not carry;
tests/plugins/test_docs_*.py run those as written in the plugins' own environments.
"""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# Tested where their frameworks are installed (tests/plugins).
PLUGIN_MODULES = ("voicestream.integrations.pipecat", "voicestream.integrations.livekit")


def python_blocks(document: Path) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", document.read_text(), flags=re.MULTILINE | re.DOTALL)


def missing_names(block: str) -> list[str]:
    """The names `block` imports from voicestream that do not exist."""
    return [
        f"{node.module}.{alias.name}"
        for node in ast.walk(ast.parse(block))
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "voicestream"
        if node.module not in PLUGIN_MODULES
        for alias in node.names
        if not hasattr(importlib.import_module(node.module), alias.name)
    ]


EXAMPLES = [
    pytest.param(block, id=f"{document.relative_to(ROOT)}#{index}")
    for document in DOCUMENTS
    for index, block in enumerate(python_blocks(document))
]


def test_the_docs_have_python_examples() -> None:
    assert len(EXAMPLES) >= 3  # the collection below is not vacuous


@pytest.mark.parametrize("block", EXAMPLES)
def test_every_voicestream_name_an_example_imports_exists(block: str) -> None:
    assert missing_names(block) == []


def test_a_renamed_event_is_caught() -> None:
    # docs/client.md's example imported this name after the event became RequestCompleted.
    stale = "from voicestream.speech import Audio, SynthesisComplete\n"
    assert missing_names(stale) == ["voicestream.speech.SynthesisComplete"]
