// pi-memory compaction for pi: pi's `session_before_compact` answered by the bridge's deterministic
// checkpoint (no model call), the committed compaction recorded, a `new_context` tool for the model,
// and `/memory-status` for people.
//
// Thin shim, like index.ts: every decision (takeover on or off, the safe boundary, the checkpoint,
// what a commit records) is made by the Python library behind the bridge (`compact_plan`,
// `compact_committed`, `compact_status`). This file only moves events and answers.
//
// Failure rule: while the takeover may be on, pi's LLM summary must never run in its place. So when
// the bridge cannot answer a plan (down, hung, too large a request), the compaction is CANCELLED and
// the user is told once per session how to get pi's own summary back (`overrideDefaultCompaction:
// false`). Only an explicit `{skip: true}` from the bridge (takeover off in the settings) lets pi's
// own summary run.
import type { ExtensionAPI } from "@mariozechner/pi-coding-agent";
import { Type } from "typebox";

const PLAN_TIMEOUT_MS = 20_000; // a plan takes milliseconds; the bridge may be busy with queued writes first
const IDLE_POLL_MS = 200;
const IDLE_POLLS = 150; // wait at most 30 s for pi to finish a run before a new_context compaction

type Kind = "info" | "warning" | "error";
type Reason = "manual" | "threshold" | "overflow" | "new_context";

export type CompactionDeps = {
  /** One bridge request (rejects on an error answer, a dead bridge or a timeout). */
  call: (method: string, params?: Record<string, unknown>, timeoutMs?: number) => Promise<any>;
  /** A queued, in-order write for the current session (the queue adds `session_id`). */
  write: (method: string, params: Record<string, unknown>) => void;
  /** Wait until queued writes are done (never rejects). */
  drain: (timeoutMs?: number) => Promise<boolean>;
  say: (ctx: any, text: string, kind?: Kind) => void;
  sessionId: () => string;
};

/**
 * The part of the branch a plan or a commit needs: from the kept tail of the compaction before
 * `upto` (or the start) to the end. Earlier entries are already out of the model's context and
 * would only make the request bigger (the bridge refuses requests over 8 MB).
 */
export function contextEntries(branch: any[], upto: number = branch.length): any[] {
  let prev = -1;
  for (let i = Math.min(upto, branch.length) - 1; i >= 0; i--) {
    if (branch[i]?.type === "compaction") {
      prev = i;
      break;
    }
  }
  if (prev < 0) return branch;
  const kept = branch.findIndex((e, i) => i < prev && e?.id === branch[prev].firstKeptEntryId);
  return branch.slice(kept >= 0 ? kept : prev);
}

const OVERFLOW = /overflow|too long|context length|context window|maximum context|token limit|too many tokens/i;

/** pi 0.73 does not say why it compacts (1.x does): inferred from the branch, as pi itself decides. */
export function inferReason(branch: any[], contextWindow: number, reserveTokens: number): Reason {
  const last = [...branch].reverse().find((e) => e?.type === "message" && e.message?.role === "assistant")?.message;
  if (!last) return "manual";
  if (last.stopReason === "error" && OVERFLOW.test(String(last.errorMessage ?? ""))) return "overflow";
  const u = last.usage ?? {};
  const tokens = u.totalTokens || (u.input ?? 0) + (u.output ?? 0) + (u.cacheRead ?? 0) + (u.cacheWrite ?? 0);
  if (contextWindow > 0 && tokens > contextWindow - reserveTokens) return "threshold";
  return "manual";
}

/** What the bridge plans from: pi's preparation without the message copies (the entries carry them). */
function planPreparation(preparation: any): Record<string, unknown> {
  const { messagesToSummarize: _m, turnPrefixMessages: _t, fileOps: _f, ...rest } = preparation ?? {};
  return JSON.parse(JSON.stringify(rest));
}

function continuation(note: string): string {
  const what = note.trim() ? ` Your note before the new window: ${note.trim()}` : "";
  return (
    "[pi-memory] A fresh context window was started at your request (new_context). The compaction summary " +
    `above points to the earlier entries; read them with session_read (entry_ids) when you need details.${what} ` +
    "Continue the task."
  );
}

export function registerCompaction(pi: ExtensionAPI, deps: CompactionDeps): void {
  let warned = false; // one notice per session when the bridge cannot plan
  let reasonOfPlan: Reason | undefined; // from session_before_compact to session_compact (pi 0.73 has no reason there)
  let newContext: { note: string } | undefined; // asked for by the model, not started yet
  let compactingForNewContext = false;
  let polls = 0;

  const cancelWith = (ctx: any, why: string) => {
    if (!warned) {
      warned = true;
      deps.say(
        ctx,
        `pi-memory: compaction cancelled: ${why}. pi's LLM summary is not used while the pi-memory takeover is on; ` +
          'set {"overrideDefaultCompaction": false} in .pi/pi-memory.json to let pi summarize itself.',
        "warning",
      );
    }
    return { cancel: true };
  };

  pi.on("session_start", () => {
    warned = false;
    reasonOfPlan = undefined;
    newContext = undefined;
    compactingForNewContext = false;
  });

  pi.on("session_before_compact", async (event: any, ctx: any) => {
    const branch: any[] = event.branchEntries ?? ctx.sessionManager.getBranch();
    const settings = event.preparation?.settings ?? {};
    const reason: Reason = compactingForNewContext
      ? "new_context"
      : (event.reason ?? inferReason(branch, Number(ctx.model?.contextWindow) || 0, Number(settings.reserveTokens) || 0));
    let plan: any;
    try {
      plan = await deps.call(
        "compact_plan",
        {
          branchEntries: JSON.parse(JSON.stringify(contextEntries(branch))),
          preparation: planPreparation(event.preparation),
          aborted: Boolean(event.signal?.aborted),
          reason,
          cwd: ctx.sessionManager.getCwd?.() ?? ctx.cwd,
          sessionId: deps.sessionId(),
        },
        PLAN_TIMEOUT_MS,
      );
    } catch (e: any) {
      return cancelWith(ctx, `the pi-memory bridge could not plan it (${e?.message ?? e})`);
    }
    if (plan?.skip) return undefined; // takeover off: pi writes its own summary
    if (event.signal?.aborted) return { cancel: true }; // aborted while we planned
    if (plan?.cancel || !plan?.compaction) {
      deps.say(ctx, `pi-memory: compaction cancelled: ${plan?.reason ?? "no plan"}`, "warning");
      return { cancel: true };
    }
    reasonOfPlan = reason;
    return { compaction: plan.compaction };
  });

  pi.on("session_compact", (event: any, ctx: any) => {
    const entry = event?.compactionEntry;
    if (!entry?.id) return;
    const branch: any[] = ctx.sessionManager.getBranch();
    const at = branch.findIndex((e) => e?.id === entry.id);
    const reason = event.reason ?? entry.details?.reason ?? reasonOfPlan ?? null;
    reasonOfPlan = undefined;
    deps.write("compact_committed", {
      entry: JSON.parse(JSON.stringify(entry)),
      branchEntries: JSON.parse(JSON.stringify(contextEntries(branch, at >= 0 ? at : branch.length))),
      cwd: ctx.sessionManager.getCwd?.() ?? ctx.cwd,
      reason: compactingForNewContext ? "new_context" : reason,
    });
  });

  // --- new_context: the model asks for a fresh window -------------------------------------

  pi.registerTool({
    name: "new_context",
    label: "New Context",
    description:
      "Start a fresh context window: after the current tool calls finish, the conversation so far is replaced by a " +
      "deterministic checkpoint (every earlier entry stays readable with session_read and entry_ids), then you " +
      "continue the task once. Use it when the context is full of finished work. Not needed for ordinary turns.",
    parameters: Type.Object({
      note: Type.Optional(Type.String({ description: "What you will do next (shown to you after the new window starts)" })),
    }),
    async execute(_id: string, params: any) {
      newContext = { note: String(params?.note ?? "") };
      return {
        content: [{ type: "text", text: "A fresh context window starts when this tool batch is done; then continue." }],
        details: { scheduled: true },
        terminate: true, // no model call on the old window when this is the only tool call of the batch
      };
    },
  } as any);

  // new input from a person takes over: the scheduled window is dropped (typed while idle: `input`;
  // a steering message delivered inside the run: a user message after the request)
  pi.on("input", (event: any) => {
    if (newContext && event?.source !== "extension") newContext = undefined;
  });
  pi.on("message_start", (event: any) => {
    if (newContext && event?.message?.role === "user") newContext = undefined;
  });

  const startNewContext = (ctx: any) => {
    const asked = newContext;
    if (!asked) return;
    if (!ctx.isIdle()) {
      // pi is still finishing the run (retry, settle): look again shortly
      if (polls++ < IDLE_POLLS) setTimeout(() => startNewContext(ctx), IDLE_POLL_MS);
      else newContext = undefined;
      return;
    }
    newContext = undefined;
    polls = 0;
    if (ctx.hasPendingMessages?.()) return; // the user typed meanwhile: their message goes first
    compactingForNewContext = true;
    ctx.compact({
      onComplete: () => {
        compactingForNewContext = false;
        pi.sendMessage(
          { customType: "pi-memory-new-context", content: continuation(asked.note), display: true } as any,
          { triggerTurn: true },
        );
      },
      onError: (e: Error) => {
        compactingForNewContext = false;
        deps.say(ctx, `pi-memory: new_context: the compaction did not happen (${e?.message ?? e}); not continuing`, "warning");
      },
    });
  };

  pi.on("agent_end", (event: any, ctx: any) => {
    if (!newContext) return;
    const messages: any[] = event?.messages ?? [];
    const last = [...messages].reverse().find((m) => m?.role === "assistant");
    if (last?.stopReason === "aborted") {
      newContext = undefined; // the user stopped the run
      return;
    }
    polls = 0;
    setTimeout(() => startNewContext(ctx), 0);
  });

  // --- /memory-status for people ------------------------------------------------------------

  pi.registerCommand("memory-status", {
    description: "pi-memory: settings in effect, archive and memory sizes, the last compaction (read-only)",
    handler: async (_args: string, ctx: any) => {
      await deps.drain(2000); // the latest compaction's window is recorded first
      const cwd = ctx.sessionManager.getCwd?.() ?? ctx.cwd;
      try {
        let r: any;
        try {
          r = await deps.call("compact_status", { cwd, session_id: deps.sessionId() || null });
        } catch (e: any) {
          if (e?.code !== "not_found") throw e;
          r = await deps.call("compact_status", { cwd }); // this session is not archived yet
        }
        deps.say(ctx, r.text);
      } catch (e: any) {
        deps.say(ctx, `pi-memory: /memory-status failed: ${e?.message ?? e}`, "error");
      }
    },
  } as any);
}
