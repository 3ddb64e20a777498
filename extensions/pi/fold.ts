// pi-memory folding for pi: consumed tool output folds into short blocks in the model's context,
// the prompt prefix stays byte-stable, every folded byte stays one `session_read` away.
//
// Thin shim, like index.ts and compact.ts: every decision (which entries fold, the stub and block
// texts, level merges, accounting) is made by the Python library (`pi_memory.fold`) behind the
// bridge methods `fold_context`, `fold_now` and `fold_status`. This file forwards pi's context (or
// the branch) with the session's fold records, persists the records that come back as custom
// entries (`pi-memory-fold`, the same on pi 0.73 and 1.x, so /reload, `pi -c` and a resume rebuild
// the same bytes) and splices the returned edits into the messages.
//
// Failure rule: folding is an optimisation. When the bridge cannot answer, the request goes out
// unfolded (said once per session); nothing is thrown into pi.
import type { ExtensionAPI } from "@mariozechner/pi-coding-agent";
import { Type } from "typebox";
import { contextEntries } from "./compact.js";

export const FOLD_TYPE = "pi-memory-fold";
const FOLD_TIMEOUT_MS = 10_000;
const DRAIN_MS = 2000; // a fold cites archive addresses: the messages before it are written first

type Kind = "info" | "warning" | "error";

export type FoldDeps = {
  call: (method: string, params?: Record<string, unknown>, timeoutMs?: number) => Promise<any>;
  drain: (timeoutMs?: number) => Promise<boolean>;
  say: (ctx: any, text: string, kind?: Kind) => void;
  sessionId: () => string;
};

/** The fold records on the active branch, in order (custom entries' data). */
export function foldRecords(branch: any[]): any[] {
  return branch.filter((e) => e?.type === "custom" && e.customType === FOLD_TYPE).map((e) => e.data);
}

/** How many of the branch's fold records precede its last compaction (they went away with it). */
export function foldsBeforeCompaction(branch: any[]): number {
  let folds = 0;
  let before = 0;
  for (const e of branch) {
    if (e?.type === "compaction") before = folds;
    else if (e?.type === "custom" && e.customType === FOLD_TYPE) folds++;
  }
  return before;
}

/** What ties a context message to its entry: id, role, timestamp, tool call id (no content). */
export function slimEntries(entries: any[]): any[] {
  return entries.flatMap((e): any[] => {
    if (e?.type === "message") {
      const m = e.message ?? {};
      return [{ id: e.id, type: "message", role: m.role, ts: m.timestamp, call: m.toolCallId ?? null }];
    }
    if (e?.type === "custom_message") return [{ id: e.id, type: e.type, role: "custom", ts: Date.parse(e.timestamp) }];
    return [];
  });
}

/** Replace messages[start:end] by message, for each edit (sorted by start; applied from the back). */
export function applyEdits(messages: any[], edits: any[]): any[] {
  const out = [...messages];
  for (let i = edits.length - 1; i >= 0; i--) {
    const { start, end, message } = edits[i];
    out.splice(start, end - start, message);
  }
  return out;
}

export function registerFold(pi: ExtensionAPI, deps: FoldDeps): void {
  let warned = false;
  const cwdOf = (ctx: any) => ctx.sessionManager.getCwd?.() ?? ctx.cwd;
  const persist = (records: any[]) => {
    for (const rec of records ?? []) pi.appendEntry(FOLD_TYPE, rec);
  };
  const warnOnce = (ctx: any, why: string) => {
    if (warned) return;
    warned = true;
    deps.say(ctx, `pi-memory: folding skipped (${why}); requests go out unfolded until the bridge answers again`, "warning");
  };

  pi.on("session_start", () => {
    warned = false;
  });

  pi.on("context", async (event: any, ctx: any) => {
    const messages: any[] = event?.messages;
    if (!Array.isArray(messages) || !messages.length || !deps.sessionId()) return undefined;
    if (messages[messages.length - 1]?.role === "user") await deps.drain(DRAIN_MS); // a run start may fold
    const branch: any[] = ctx.sessionManager.getBranch();
    let r: any;
    try {
      r = await deps.call(
        "fold_context",
        {
          session_id: deps.sessionId(),
          cwd: cwdOf(ctx),
          messages: JSON.parse(JSON.stringify(messages)),
          entries: slimEntries(contextEntries(branch)),
          folds: foldRecords(branch),
        },
        FOLD_TIMEOUT_MS,
      );
    } catch (e: any) {
      // a dead or hung bridge is already reported once by index.ts; say only what else went wrong
      if (e?.code !== "bridge_down" && e?.code !== "timeout") warnOnce(ctx, e?.message ?? String(e));
      return undefined;
    }
    persist(r?.records);
    return r?.edits?.length ? { messages: applyEdits(messages, r.edits) } : undefined;
  });

  const foldNow = async (ctx: any, summary?: string, keepLast?: number) => {
    await deps.drain(DRAIN_MS);
    const branch: any[] = ctx.sessionManager.getBranch();
    const r = await deps.call(
      "fold_now",
      {
        session_id: deps.sessionId(),
        cwd: cwdOf(ctx),
        entries: JSON.parse(JSON.stringify(contextEntries(branch))),
        folds: foldRecords(branch),
        ...(summary === undefined ? {} : { summary }),
        keep_last: keepLast ?? 0,
      },
      FOLD_TIMEOUT_MS,
    );
    persist(r?.records);
    return r;
  };

  const tool = (name: string, label: string) => ({
    name,
    label,
    description:
      "Fold tool output you have consumed: everything since the last fold up to the last completed tool " +
      "call/result is replaced in your context by ONE block holding your summary and each folded entry's " +
      "archive address (r12/m3); session_read with that address shows an entry in full. Write the summary " +
      "as what you learned and still need (facts, paths, decisions), not what you did. keep_last leaves the " +
      "newest completed tool calls unfolded." +
      (name === "compress" ? " (Same as the fold tool.)" : ""),
    parameters: Type.Object({
      summary: Type.String({ description: "What you learned from the folded tool output that you still need" }),
      keep_last: Type.Optional(Type.Number({ description: "Leave this many of the newest completed tool calls unfolded (default 0)" })),
    }),
    async execute(_id: string, params: any, _signal: any, _onUpdate: any, ctx: any) {
      const r = await foldNow(ctx, String(params?.summary ?? ""), Math.max(0, Number(params?.keep_last) || 0));
      return {
        content: [{ type: "text", text: String(r?.text ?? "") }],
        details: { folds: (r?.records ?? []).map((x: any) => x.id) },
      };
    },
  });
  pi.registerTool(tool("fold", "Fold") as any);
  pi.registerTool(tool("compress", "Compress") as any);

  pi.registerCommand("fold", {
    description: "pi-memory folding: /fold (fold old tool output now) | /fold status",
    handler: async (args: string, ctx: any) => {
      const text = (args ?? "").trim();
      try {
        if (text === "status") {
          const branch: any[] = ctx.sessionManager.getBranch();
          const r = await deps.call("fold_status", {
            cwd: cwdOf(ctx),
            folds: foldRecords(branch),
            compacted: foldsBeforeCompaction(branch),
          });
          deps.say(ctx, r.text);
        } else if (!text) {
          deps.say(ctx, `pi-memory: ${(await foldNow(ctx)).text}`);
        } else {
          deps.say(ctx, "usage: /fold | /fold status");
        }
      } catch (e: any) {
        deps.say(ctx, `pi-memory: /fold failed: ${e?.message ?? e}`, "error");
      }
    },
  } as any);
}
