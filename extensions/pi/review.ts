// pi-memory self-review for pi: `/review` shows the rule-based review of this workspace's runs to the
// user (no model turn); `/dream` hands the same report to the model as evidence, asking it to propose
// rules through `memory_propose` (provisional until the user runs /remember confirm:ID).
//
// A thin shim over the bridge (`review`, `review_dream` in `pi_memory.review.commands`): the words after
// the command go to the library as typed, with pi's cwd; the defaults (this workspace, the last 30 days),
// the report and the model's request are all made there.
import type { ExtensionAPI } from "@mariozechner/pi-coding-agent";

const REVIEW_TIMEOUT_MS = 60_000; // one pass over the window's runs: seconds on a large archive

export type ReviewHost = {
  call(method: string, params: Record<string, unknown>, timeoutMs?: number): Promise<any>;
  /** Wait until this session's queued writes are in the archive (never rejects). */
  drain(timeoutMs?: number): Promise<boolean>;
  say(ctx: any, text: string, kind?: "info" | "warning" | "error"): void;
};

const USAGE = "[since:YYYY-MM-DD|all] [until:YYYY-MM-DD] [project:P|all] [agent:A] [min:K]";

export function registerReview(pi: ExtensionAPI, host: ReviewHost): void {
  const ask = async (method: string, args: string, ctx: any) => {
    await host.drain(2000); // this session's latest runs are reviewed too
    const cwd = ctx.sessionManager?.getCwd?.() ?? ctx.cwd;
    return host.call(method, { args: args ?? "", cwd }, REVIEW_TIMEOUT_MS);
  };

  pi.registerCommand("review", {
    description: `pi-memory: recurring failures, corrections, costs, draft rules and the memory ledger (no model turn): /review ${USAGE}`,
    handler: async (args: string, ctx: any) => {
      try {
        host.say(ctx, String((await ask("review", args, ctx))?.text ?? ""));
      } catch (e: any) {
        host.say(ctx, `pi-memory: /review failed: ${e?.message ?? e}`, "error");
      }
    },
  } as any);

  pi.registerCommand("dream", {
    description: `pi-memory: give the review to the model as evidence and ask it to propose rules (provisional): /dream ${USAGE}`,
    handler: async (args: string, ctx: any) => {
      try {
        if (ctx.isIdle && !ctx.isIdle()) return host.say(ctx, "pi-memory: /dream waits until the agent is idle", "warning");
        const r = await ask("review_dream", args, ctx);
        if (!r?.findings) return host.say(ctx, `${r?.summary ?? "review"}: nothing recurs, no rule to propose.`);
        pi.sendMessage({ customType: "pi-memory-dream", content: String(r.text), display: true } as any, { triggerTurn: true });
      } catch (e: any) {
        host.say(ctx, `pi-memory: /dream failed: ${e?.message ?? e}`, "error");
      }
    },
  } as any);
}
