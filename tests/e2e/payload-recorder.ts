// Test-only pi extension: appends every provider request payload (pi's `before_provider_request`) as
// one JSON line to the file named by PI_E2E_PAYLOADS, with the session id and cwd it was sent from
// and the number of pi-memory fold records on the branch when it was sent (`folds`).
// The payload is returned unchanged. The faux provider (faux-provider.ts) passes its requests through
// this hook the way real providers do.
import type { ExtensionAPI } from "@mariozechner/pi-coding-agent";
import { appendFileSync } from "node:fs";

export default function (pi: ExtensionAPI) {
  const file = process.env.PI_E2E_PAYLOADS;
  if (!file) return;
  pi.on("before_provider_request", (event: any, ctx: any) => {
    const folds = ctx.sessionManager.getBranch().filter((e: any) => e.type === "custom" && e.customType === "pi-memory-fold").length;
    const record = { session_id: ctx.sessionManager.getSessionId(), cwd: ctx.cwd, folds, payload: event.payload };
    appendFileSync(file, JSON.stringify(record) + "\n");
  });
}
