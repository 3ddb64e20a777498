"""Front ends: thin shells over the facade, one per audience.

What it is for: `cli/` (people), `bridge/` (JSON lines for the pi extension),
`mcp_server` (any MCP-capable agent), `watch` (follows session folders), `web/`
(the browser viewer), and `tools/` (the model-facing tool specs and handlers
the bridge and MCP share). Each turns a request into one call of `Archive` and
its answer into text or JSON with a presenter; none holds SQL or rules.

May import: the facade (`pi_memory.archive`, `pi_memory.archive.present`,
`pi_memory.archive.team`), `pi_memory.errors`, the pure core, and the value
types and tool vocabularies of the components (`memory`, `recall`, `review`,
`compact`). Never the storage, search, runs or ingest layers (import-linter
checks it), and nothing imports a front end.
"""
