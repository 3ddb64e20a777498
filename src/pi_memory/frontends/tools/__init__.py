"""The model's tools and pi's slash commands: specs, argument checks and handlers over the facade.

`memory` (the memory_* tools and /remember, /memories, /forget), `recall` (the
recall tool), `review` (/review and /dream). The bridge and the MCP server
both register them, so a tool behaves the same for pi and for any MCP client.

May import: the facade, its presenters, the vocabularies of the components
they serve (`memory`, `recall`, `review` models and presenters), `pi_memory.errors`.
"""
