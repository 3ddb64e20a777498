// Test-only pi extension for the pi-memory end-to-end tests (pi 0.73.1 and 1.6.0):
// - /e2e-reload: reloads extensions in-process (RPC mode has no built-in /reload), so pi-memory sees
//   session_shutdown(reload) + session_start(reload) as in the TUI's /reload;
// - session_before_compact: supplies a deterministic compaction summary (no LLM needed), written by
//   pi as a `compaction` entry with fromHook: true; pi-memory captures it at session_compact;
// - before_agent_start: adds a custom message to the "turn one" prompt (pi stamps its file entry
//   later than the message, the case pi-memory reconciles); /e2e-note sends one while idle (it never
//   passes message_end, pi-memory finds it in the branch).
import type { ExtensionAPI } from "@mariozechner/pi-coding-agent";

export default function (pi: ExtensionAPI) {
  pi.registerCommand("e2e-reload", {
    description: "Reload extensions (test only)",
    handler: async (_args: string, ctx: any) => {
      await ctx.reload();
    },
  } as any);

  pi.on("before_agent_start", async (event: any) => {
    if (!String(event.prompt ?? "").includes("turn one")) return;
    return { message: { customType: "e2e", content: "记忆提示 e2e hint for turn one: nginx buffering", display: true } };
  });

  pi.registerCommand("e2e-note", {
    description: "Send a custom message while idle (test only)",
    handler: async (args: string) => {
      pi.sendMessage({ customType: "e2e-note", content: `idle note: ${args}`, display: true } as any);
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
