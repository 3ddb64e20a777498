// pi-memory usage for pi: the model's `session_usage` tool ("how much did this session cost?") and
// `/usage` for people: this session's model requests, tokens, cache-hit rate and dollars per model,
// and its context ledger (what pi-memory's memories and recall added to the requests, what its
// folding and compaction removed, priced).
//
// A thin shim over the bridge method `session_usage` (`pi_memory.frontends.tools.usage`): the host
// supplies what the model cannot know (this session's id, the workspace); every figure is made there.
import type { ExtensionAPI } from "@mariozechner/pi-coding-agent";
import { Type } from "typebox";

const USAGE_TIMEOUT_MS = 20_000; // a long session's ledger reads its fold records and compactions

export type UsageHost = {
  call(method: string, params: Record<string, unknown>, timeoutMs?: number): Promise<any>;
  /** Wait until this session's queued writes are in the archive (never rejects). */
  drain(timeoutMs?: number): Promise<boolean>;
  say(ctx: any, text: string, kind?: "info" | "warning" | "error"): void;
  sessionId(): string;
};

export function registerUsage(pi: ExtensionAPI, host: UsageHost): void {
  const ask = async (ctx: any, sessionId?: string) => {
    await host.drain(2000); // this session's latest requests are counted too
    const cwd = ctx?.sessionManager?.getCwd?.() ?? ctx?.cwd;
    const r = await host.call("session_usage", { session_id: sessionId || host.sessionId() || null, cwd }, USAGE_TIMEOUT_MS);
    return String(r?.text ?? "");
  };

  pi.registerTool({
    name: "session_usage",
    label: "Session Usage",
    description:
      "How much a coding session cost: its model requests, input/output/cache tokens, cache-hit rate and dollars " +
      "per model (the session file's own costs, else an offline price table; unknown for a model the table lacks), " +
      "and what pi-memory added to its requests (memories, recall results) and what its folding and compaction " +
      "removed, priced. Default: this session.",
    parameters: Type.Object({
      session_id: Type.Optional(Type.String({ description: "Another session's id (or an 8+ character prefix); default: this session" })),
    }),
    async execute(_id: string, params: any, _signal: any, _onUpdate: any, ctx: any) {
      const text = await ask(ctx, params?.session_id ? String(params.session_id) : undefined);
      return { content: [{ type: "text", text }], details: {} };
    },
  } as any);

  pi.registerCommand("usage", {
    description: "pi-memory: this session's tokens, cache hits and dollars, and its context ledger",
    handler: async (args: string, ctx: any) => {
      try {
        host.say(ctx, await ask(ctx, (args ?? "").trim() || undefined));
      } catch (e: any) {
        host.say(ctx, `pi-memory: /usage failed: ${e?.message ?? e}`, "error");
      }
    },
  } as any);
}
