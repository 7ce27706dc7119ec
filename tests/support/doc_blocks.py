"""The code blocks of a doc page that are marked to be run: `<!-- doc-test: NAME -->` right
before a ```python fence. Standard library only: the plugin environments use it too."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_BLOCK = re.compile(r"<!-- doc-test: (?P<name>[\w-]+) -->\s*\n```python\n(?P<code>.*?)\n```", re.DOTALL)


def doc_blocks(page: str, name: str) -> list[str]:
    """The marked blocks called `name` of docs/`page`, in order; at least one, or AssertionError."""
    text = (ROOT / "docs" / page).read_text()
    blocks = [match["code"] for match in _BLOCK.finditer(text) if match["name"] == name]
    assert blocks, f"docs/{page} has no block marked doc-test: {name}"
    return blocks


def run_block(code: str, replacements: dict[str, str]) -> None:
    """Execute a block as a script (`__name__ == "__main__"`), its URLs pointed at a test server."""
    for old, new in replacements.items():
        code = code.replace(old, new)
    exec(compile(code, "<doc block>", "exec"), {"__name__": "__main__"})
