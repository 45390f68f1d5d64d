"""docs/http-api.md lists every error code the server can answer, each with the status the code gives it.

The codes are read from the code, not from the page: the refusals catalogue (long_running_agent/refusals/) with
the API's status for each (web/api_errors.py), and every answer the server's modules build with a literal status
and code (web/ and slack/: the gate, ADK's wording, the database's errors, Slack's interactivity URL).
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
import re
from collections.abc import Iterator

from support.processes import ROOT

from long_running_agent import refusals
from long_running_agent.refusals import Refusal
from long_running_agent.refusals.answers import NotDelivered
from long_running_agent.web.api_errors import STATUS, refusal_error

PACKAGE = ROOT / "long_running_agent"
PAGE = ROOT / "docs" / "http-api.md"
# Refusals the API never answers with: what each is, and who hears it instead.
NOT_ON_THE_API = {
    "answer_not_accepted": "the guard's, told in the chat as the agent's note",
    "answer_disagrees": "the guard's, told in the chat",
    "no_such_call": "the guard's, told in the chat",
    "no_ticket": "the guard's, told in the chat",
    "not_an_approval": "the guard's, told in the chat",
    "needs_approval": "a tool's answer, for the model",
    "needs_no_approval": "a tool's answer, for the model",
    "not_approved": "a tool's answer, for the model",
    "invalid_setting": "at start: the server does not start",
    # Told in the chat; on the API the gate, the body limit or the database's errors answer first (listed below).
    "invalid_characters": "the chat's message",
    "too_large": "the chat's message",
    "invalid_user_id": "the chat's user id",
    "database_unavailable": "the chat's ledger",
    "refused": "the base class's code; every refusal has its own",
}


def _strings(node: ast.expr) -> set[str]:
    """The codes an expression can give: a constant, or either branch of `a if test else b`."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value}
    if isinstance(node, ast.IfExp):
        return _strings(node.body) | _strings(node.orelse)
    return set()


def _subclasses(cls: type) -> Iterator[type]:
    for sub in cls.__subclasses__():
        yield sub
        yield from _subclasses(sub)


def refusal_codes() -> set[str]:
    """Every code of the catalogue: each class's own, and those given to `code=` or `code =` in its modules."""
    for module in pkgutil.iter_modules(refusals.__path__):
        importlib.import_module(f"{refusals.__name__}.{module.name}")
    codes = {cls.code for cls in _subclasses(Refusal)} | {code for code, _next in NotDelivered.OUTCOMES.values()}
    for path in (PACKAGE / "refusals").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.keyword) and node.arg == "code":
                codes |= _strings(node.value)
            elif isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "code" for t in node.targets):
                codes |= _strings(node.value)
    return codes


def literal_answers() -> tuple[set[tuple[str, int]], set[str]]:
    """(code, status) of every answer web/ and slack/ build with a literal status; the codes whose status is ADK's."""
    pairs: set[tuple[str, int]] = set()
    any_status: set[str] = set()
    for path in [*(PACKAGE / "web").glob("*.py"), *(PACKAGE / "slack").glob("*.py")]:
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant) \
                    and isinstance(node.args[1].value, str) and re.fullmatch(r"[a-z_]+", node.args[1].value):
                status = node.args[0]
                if isinstance(status, ast.Constant) and isinstance(status.value, int) and 400 <= status.value < 600:
                    pairs.add((node.args[1].value, status.value))
                elif getattr(node.func, "id", None) == "ApiError":
                    any_status.add(node.args[1].value)  # ApiError(status, "refused", ...): ADK's status
            if isinstance(node, ast.Call) and (kept := [k for k in node.keywords if k.arg == "status_code"]) \
                    and isinstance(kept[0].value, ast.Constant):
                for body in (a for a in node.args if isinstance(a, ast.Dict)):
                    pairs |= {(v.value, kept[0].value.value) for k, v in zip(body.keys, body.values, strict=True)
                              if isinstance(k, ast.Constant) and k.value == "error" and isinstance(v, ast.Constant)}
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict):
                name = getattr(node.targets[0], "id", "")
                for key, value in zip(node.value.keys, node.value.values, strict=True):
                    if not (isinstance(value, ast.Tuple) and isinstance(value.elts[0], ast.Constant)):
                        continue
                    if name == "_REFUSALS" and isinstance(key, ast.Constant):  # ADK's status: its code
                        pairs.add((value.elts[0].value, key.value))
                    elif name == "_ADK_FORBIDDEN":  # ADK's origin and host checks answer 403
                        pairs.add((value.elts[0].value, 403))
    return pairs, any_status


def answers() -> tuple[set[tuple[str, int]], set[str]]:
    """Every (code, status) the server can answer, and the codes that take ADK's status."""
    pairs, any_status = literal_answers()
    on_the_api = refusal_codes() - set(NOT_ON_THE_API)
    pairs |= {(code, STATUS.get(code, 409)) for code in on_the_api}
    pairs |= set(STATUS.items())
    return pairs, any_status


def documented() -> set[tuple[str, str]]:
    """(code, status as written) for each row of the page's table of errors; a row may list several codes."""
    section = PAGE.read_text().split("\n## Error answers\n", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| (\d{3}|any) \| (.+?) \| .+ \|$", section, re.M)
    return {(code, status) for status, codes in rows for code in re.findall(r"`([a-z_]+)`", codes)}


def test_the_codes_are_read_from_the_code():
    pairs, any_status = answers()
    codes = {code for code, _status in pairs}
    # What the catalogue, the status table and the literal answers each hold, so that a reader that finds nothing
    # does not pass.
    assert {"ticket_not_found", "not_in_group", "not_an_approver", "not_requester", "schema_behind"} <= codes
    assert {"missing_token", "invalid_identity", "too_large", "host_not_allowed", "invalid_signature"} <= codes
    assert any_status == {"refused"} and ("not_found", 404) in pairs
    assert set(NOT_ON_THE_API) <= refusal_codes(), "a refusal listed here is gone from the catalogue"
    assert refusal_error(Refusal("x", code="not_in_group")).status == 403


def test_every_code_the_server_answers_is_in_the_page_with_its_status():
    pairs, any_status = answers()
    shown = documented()
    missing = sorted(f"{status} {code}" for code, status in pairs if (code, str(status)) not in shown)
    assert missing == [], f"docs/http-api.md, 'Error answers', lacks these rows: {missing}"
    assert all((code, "any") in shown for code in any_status)


def test_the_page_lists_no_code_the_server_does_not_answer():
    pairs, any_status = answers()
    known = {(code, str(status)) for code, status in pairs} | {(code, "any") for code in any_status}
    assert sorted(documented() - known) == []
