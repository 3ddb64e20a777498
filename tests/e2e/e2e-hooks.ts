// Test-only pi extension for the pi-memory end-to-end tests (pi 0.73.1 and 1.6.0):
// - /e2e-reload: reloads extensions in-process (RPC mode has no built-in /reload), so pi-memory sees
//   session_shutdown(reload) + session_start(reload) as in the TUI's /reload;
// - session_before_compact: supplies a deterministic compaction summary (no LLM needed), written by
//   pi as a `compaction` entry with fromHook: true; pi-memory captures it at session_compact.
import type { ExtensionAPI } from "@mariozechner/pi-coding-agent";

export default function (pi: ExtensionAPI) {
  pi.registerCommand("e2e-reload", {
    description: "Reload extensions (test only)",
    handler: async (_args: string, ctx: any) => {
      await ctx.reload();
    },
  } as any);

  pi.on("session_before_compact", async (event: any) => {
    const p = event.preparation;
    return {
      compaction: {
        summary: `E2E 压缩摘要 compaction summary: ${p.messagesToSummarize.length} messages, nginx proxy_buffering`,
        firstKeptEntryId: p.firstKeptEntryId,
        tokensBefore: p.tokensBefore,
        details: { by: "e2e-hooks" },
      },
    };
  });
}
