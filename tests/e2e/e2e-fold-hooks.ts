// Test-only pi extension for the folding end-to-end test (pi 0.73.1 and 1.6.0):
// - tool_call of session_read with address "FROM_FOLD": replaced by the address the newest fold
//   record's first stub cites, i.e. what a model reading the stub would pass.
import type { ExtensionAPI } from "@mariozechner/pi-coding-agent";

export default function (pi: ExtensionAPI) {
  pi.on("tool_call", (event: any, ctx: any) => {
    if (event.toolName !== "session_read" || event.input?.address !== "FROM_FOLD") return undefined;
    const folds = ctx.sessionManager
      .getBranch()
      .filter((e: any) => e.type === "custom" && e.customType === "pi-memory-fold" && e.data?.kind === "stubs");
    const item = folds.length ? folds[folds.length - 1].data.items?.[0] : undefined;
    if (item?.address) event.input.address = item.address;
    return undefined;
  });
}
