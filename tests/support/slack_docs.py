"""docs/slack.md's examples, read for tests: the messages the page shows are the ones the app sends."""

from __future__ import annotations

import json
import re
from typing import Any

from .processes import ROOT

DOCS = ROOT / "docs" / "slack.md"


def shown_in_docs(name: str, kind: str = "json") -> Any:
    """A block of docs/slack.md marked `<!-- slack: name -->`: JSON, read; text, as is."""
    [block] = re.findall(rf"<!-- slack: {name} -->\n```{kind}\n(.*?)```", DOCS.read_text(), re.S)
    return json.loads(block) if kind == "json" else block


def same_shape(real: Any, shown: Any) -> bool:
    """Equal once ids, times and amounts that change from run to run are masked."""
    return _masked(json.dumps(real, sort_keys=True)) == _masked(json.dumps(shown, sort_keys=True))


def _masked(text: str) -> str:
    text = re.sub(r"([TPN])-[0-9a-f]{12}\b", r"\1-…", text)
    return re.sub(r"\d{4}-\d\d-\d\d \d\d:\d\d", "YYYY-MM-DD hh:mm", text)
