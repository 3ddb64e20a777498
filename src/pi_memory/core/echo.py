"""Echoes: what the archive's own tools put into a session, told apart from the evidence (pure).

Design idea: recall must never answer with its own echoes. Every search a model runs leaves
traces in the session it runs in: the call that asked (`→ session_search({"query": "deploy
codename"})`), the answer (the hits, quoted), and, when the whole run was a question to the
archive, the user's prompt ("what was the deploy codename?") and the model's reply restating what
it found. All of these hold the query's words, are short, and are newer than the original
message: BM25 puts them first, and the more recall is used, the worse it gets. They stay in the
archive (they are what happened) but are left out of ranking by default:

- message level: an assistant message calling one of the archive's tools (`session_search`,
  `session_read`, `session_review`, `session_blame`, `session_usage`, `memory_*`, also as an MCP
  tool `mcp__<server>__<name>`),
  and the result of such a call;
- run level: a run whose tool calls all went to the archive (at least one), a question to the
  archive and its answer: every message of it (the prompt, the calls, the results, the reply).
  A run that also did other work (read a file, ran a command) keeps its prompt and replies: they
  are evidence of that work.

An echo is written into the full-text index with one more token, `ECHO_TOKEN`, which no text can
produce (`§` is not a word character, so the tokenizer never emits it inside a word): a search
leaves echoes out with an FTS5 `NOT` against that token's short posting list, inside the index,
before anything is ranked, so echoes never take a candidate's place.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

# The tools whose results are the archive's own output (the pi extension's, the MCP server's and
# the memory tools). `fold` and `compress` are not here: they manage the context, return no
# archived text and hold no query.
ARCHIVE_TOOLS = frozenset(
    {
        "session_search",
        "session_read",
        "session_review",
        "session_blame",
        "session_usage",
        "memory_search",
        "memory_read",
        "memory_propose",
        "memory_update",
    }
)
MCP_PREFIX = "mcp__"  # Claude Code and Codex name an MCP tool `mcp__<server>__<tool>`
ECHO_TOKEN = "§echo"  # an index token no text is cut into (see the module docstring)

_CALLING_ROLES = ("assistant",)
_RESULT_ROLES = ("tool_result", "tool_error")
# roles of a recall run that are part of the question and its answer (a summary opening the run,
# a user's `!` command or an injected message are not)
_RUN_ROLES = ("user", "assistant", "tool_result", "tool_error")


def is_archive_tool(name: str) -> bool:
    """`session_search`, or the same tool served over MCP (`mcp__pi-memory__session_search`)."""
    if name.startswith(MCP_PREFIX):
        name = name[len(MCP_PREFIX) :].partition("__")[2]
    return name in ARCHIVE_TOOLS


def tools_called(role: str, meta: Mapping[str, Any]) -> list[str]:
    """The tools an assistant message calls (`meta["tools"]`, as `render` keeps them)."""
    tools = meta.get("tools") if role in _CALLING_ROLES else None
    return [str(t) for t in tools] if isinstance(tools, list) else []


def is_echo_message(role: str, meta: Mapping[str, Any]) -> bool:
    """A call to one of the archive's tools, or such a tool's result (whatever the rest of its run)."""
    if role in _RESULT_ROLES:
        # several results on one line (Claude Code) name all their tools: an echo if all are the archive's
        listed = meta.get("tools")
        tools = listed if isinstance(listed, list) else [meta.get("tool")]
        return all(is_archive_tool(str(t or "")) for t in tools)
    return any(is_archive_tool(t) for t in tools_called(role, meta))


def is_recall_run(messages: Sequence[tuple[str, Mapping[str, Any]]]) -> bool:
    """A run (role, meta of each message) whose tool calls all went to the archive, at least one."""
    tools = [t for role, meta in messages for t in tools_called(role, meta)]
    return bool(tools) and all(is_archive_tool(t) for t in tools)


def run_echoes(messages: Sequence[tuple[str, Mapping[str, Any]]]) -> list[bool]:
    """Per message of one run (role, meta, in order): whether it is an echo."""
    whole = is_recall_run(messages)
    return [(whole and role in _RUN_ROLES) or is_echo_message(role, meta) for role, meta in messages]


def session_echoes(messages: Sequence[tuple[str, Mapping[str, Any]]]) -> list[bool]:
    """Per message of a session or of its tail from a user message on (role, meta, in display
    order): whether it is an echo. A user message starts a run (`summary.segment` also lets a
    compaction summary open one: here it just belongs to the run before, as it is no echo either)."""
    if not any(is_echo_message(role, meta) for role, meta in messages):
        return [False] * len(messages)  # the common case: no call to the archive at all
    out: list[bool] = []
    start = 0
    for end in range(1, len(messages) + 1):
        if end == len(messages) or messages[end][0] == "user":
            out += run_echoes(messages[start:end])
            start = end
    return out


def with_echo_token(chars: str | bytes, echo: bool) -> str | bytes:
    """A message's `chars` index column with `ECHO_TOKEN` added when it is an echo (text or UTF-8)."""
    if not echo:
        return chars
    if isinstance(chars, bytes):
        token = ECHO_TOKEN.encode()
        return chars + b" " + token if chars else token
    return f"{chars} {ECHO_TOKEN}" if chars else ECHO_TOKEN


def fts_without_echoes(expr: str) -> str:
    """An FTS5 expression whose matches that are echoes are left out, inside the index."""
    return f'({expr}) NOT "{ECHO_TOKEN}"'
