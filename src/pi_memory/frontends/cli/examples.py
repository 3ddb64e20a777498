"""The examples under each command's `--help` (llm / sqlite-utils style), keyed by command path."""

from __future__ import annotations

# Examples shown under each command's --help (llm / sqlite-utils style). The short ids, runs and
# entry ids are those of the demo archive (`pi-memory import examples/sessions`); a test runs
# every example against it, except those of the commands in tests/test_cli_help.py's NOT_RUN.
EXAMPLES: dict[str, tuple[str, ...]] = {
    "import": ("pi-memory import", "pi-memory import examples/sessions", "pi-memory import --agent claude --json"),
    "search": (
        'pi-memory search "缓存索引 方案"',
        "pi-memory search nginx --session 6aa2dbdd",
        "pi-memory search 寶玉 --since 2026-01-01",
        "pi-memory search nginx --scope summary",
        "pi-memory search 响应式 --sessions",
        "pi-memory search legacy --kind tool_error --json",
    ),
    "read": (
        "pi-memory read 5ac092eb",
        "pi-memory read 5ac092eb --around 15 --before 2 --after 2",
        "pi-memory read r4",
        "pi-memory read r4/m1 --raw",
    ),
    "runs": ("pi-memory runs", "pi-memory runs --project chat-gateway", "pi-memory runs --session 6aa2dbdd --json"),
    "show": ("pi-memory show r6",),
    "forget": ("pi-memory forget 36b88c10 --yes", "pi-memory forget r6 --yes", "pi-memory forget 23 --yes"),
    "stats": ("pi-memory stats", "pi-memory stats --json"),
    "check": ("pi-memory check",),
    "status": ("pi-memory status", "pi-memory status --session 6aa2dbdd --json"),
    "entries": ("pi-memory entries 6aa2dbdd 85a2d914", "pi-memory entries 6aa2dbdd 85a2d914 --raw"),
    "sessions": ("pi-memory sessions", "pi-memory sessions --agent pi --limit 50", "pi-memory sessions --json"),
    "recall": (
        "pi-memory recall nginx",
        "pi-memory recall --session 6aa2dbdd --scope session nginx timeout",
        "pi-memory recall --session 6aa2dbdd --scope session --list --kind tool_call",
        "pi-memory recall --session 6aa2dbdd --scope session --file deploy/nginx.conf",
        "pi-memory recall nginx --page 2 --limit 5",
    ),
    "doctor": ("pi-memory doctor", "pi-memory doctor --json"),
    "remember": (
        'pi-memory remember --pin "use pnpm, never npm"',
        'pi-memory remember --kind decision "Redis routes queries"',
    ),
    "memories": ("pi-memory memories", "pi-memory memories pnpm --status all"),
    "forget-memory": ("pi-memory forget-memory 3f2a",),
    "memory": ("pi-memory memory list", "pi-memory memory verify --all", "pi-memory memory export -o memories.jsonl"),
    "memory remember": ('pi-memory memory remember --scope session --session 5ac092eb "try the LRU first"',),
    "memory list": ("pi-memory memory list", "pi-memory memory list --status provisional"),
    "memory show": ("pi-memory memory show 3f2a",),
    "memory forget": ("pi-memory memory forget 3f2a",),
    "memory confirm": ("pi-memory memory confirm 3f2a --pin",),
    "memory pin": ("pi-memory memory pin 3f2a",),
    "memory unpin": ("pi-memory memory unpin 3f2a",),
    "memory verify": ("pi-memory memory verify", "pi-memory memory verify --all --json"),
    "review": ("pi-memory review", "pi-memory review --since 2026-01-01 --min-count 2", "pi-memory review --json"),
    "review link": ("pi-memory review link 3 sig_1a2b3c4d",),
    "serve": ("pi-memory serve", "pi-memory serve --port 8765 --open", "pi-memory serve --write"),
    "memory export": ("pi-memory memory export -o memories.jsonl", "pi-memory memory export --raw"),
    "memory import": ("pi-memory memory import memories.jsonl",),
    "memory repair": ("pi-memory memory repair", "pi-memory memory repair --from memories.jsonl"),
    "memory inject": ("pi-memory memory inject", "pi-memory memory inject --budget 2000"),
    "watch": ("pi-memory watch", "pi-memory watch ~/.pi/agent/sessions --agent pi"),
    "mcp": ("pi-memory mcp", "claude mcp add pi-memory -- pi-memory mcp"),
    "bridge": ('PI_MEMORY_BRIDGE="python3 -m pi_memory bridge" pi',),
    "pg-roles": ("pi-memory pg-roles | psql postgresql://owner@db.internal/pi_memory",),
    "push": ("pi-memory push --to postgresql://me@db.internal/pi_memory",),
}
