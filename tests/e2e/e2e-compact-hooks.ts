// Test-only pi extension for the compaction end-to-end tests (pi 0.73.1 and 1.6.0). Loaded BEFORE the
// pi-memory extension, so its `session_before_compact` handler sees pi's event first (handlers share
// the event object and run in load order):
// - PI_E2E_PAYLOADS=file: every provider request (`before_provider_request`) is appended as one JSON line;
// - PI_E2E_CUT_AT_RESULT=1: pi's proposed `firstKeptEntryId` is moved onto the last tool result of the
//   branch, a cut that separates that result from its call (pi's own cut points never do; this stands
//   in for a proposal that would), so pi-memory must move it back;
// - PI_E2E_ABORT_COMPACTION=1: the event's signal is replaced by an aborted one, as if the user had
//   pressed Esc during the compaction (RPC mode of pi 0.73 has no command that aborts a compaction);
// - tool_call of session_read with entry_ids ["FROM_CHECKPOINT"]: replaced by the first entry id the
//   latest compaction summary cites, i.e. what a model reading the checkpoint would pass.
import type { ExtensionAPI } from "@mariozechner/pi-coding-agent";
import { appendFileSync } from "node:fs";

export default function (pi: ExtensionAPI) {
  pi.on("before_provider_request", (event: any) => {
    const file = process.env.PI_E2E_PAYLOADS;
    if (file) appendFileSync(file, JSON.stringify(event.payload) + "\n");
    return undefined;
  });

  pi.on("session_before_compact", async (event: any) => {
    if (process.env.PI_E2E_CUT_AT_RESULT) {
      const results = event.branchEntries.filter((e: any) => e.type === "message" && e.message?.role === "toolResult");
      if (results.length) event.preparation.firstKeptEntryId = results[results.length - 1].id;
    }
    if (process.env.PI_E2E_ABORT_COMPACTION) event.signal = AbortSignal.abort();
    return undefined;
  });

  pi.on("tool_call", (event: any, ctx: any) => {
    const ids = event.input?.entry_ids;
    if (event.toolName !== "session_read" || !Array.isArray(ids) || ids[0] !== "FROM_CHECKPOINT") return undefined;
    const compaction = [...ctx.sessionManager.getBranch()].reverse().find((e: any) => e.type === "compaction");
    const cited = String(compaction?.summary ?? "").match(/\[([0-9a-f]{8})\]/);
    if (cited) event.input.entry_ids = [cited[1]];
    return undefined;
  });
}
