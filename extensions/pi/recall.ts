// Recall inside the current session for the model's session_search / session_read (spec's
// `pi_compact_recall`, folded into those two tools): scope (branch, session, all), entry ids, file,
// kind, source class, list mode, paging and raw segments. The library (`Archive.recall`, bridge
// method `recall`) does all of it; this file declares the extra parameters and passes the host's
// facts the model cannot know: the session id and the ids of the current branch.
import { Type } from "typebox";

/** Parameters session_search gains (all optional; any of them switches to a scoped recall). */
export const SEARCH_FIELDS = {
  scope: Type.Optional(
    Type.Union([Type.Literal("branch"), Type.Literal("session"), Type.Literal("all")], {
      description: "branch: this line of work (includes what compaction folded away); session: every branch; all: every session",
    }),
  ),
  action: Type.Optional(
    Type.Union([Type.Literal("search"), Type.Literal("list"), Type.Literal("summary"), Type.Literal("summary_search")], {
      description: "list: the newest records in scope, no query needed; summary: the newest compaction summary",
    }),
  ),
  file: Type.Optional(Type.String({ description: "Only records that read or changed this path" })),
  kind: Type.Optional(
    Type.Union(
      ["user", "assistant", "tool_call", "tool_result", "tool_error", "bash", "custom", "summary"].map((k) =>
        Type.Literal(k),
      ),
      { description: "Only this kind of record" },
    ),
  ),
  source_class: Type.Optional(
    Type.Union([Type.Literal("primary"), Type.Literal("derived"), Type.Literal("all")], {
      description: "derived: compaction and branch summaries; primary: everything else",
    }),
  ),
  page: Type.Optional(Type.Number({ description: "Result page (from next_page)" })),
};

/** Parameters session_read gains: exact entries of this session by id, optionally raw in segments. */
export const READ_FIELDS = {
  entry_ids: Type.Optional(Type.Array(Type.String(), { description: "pi entry ids, e.g. the [ids] a compaction summary cites" })),
  scope: SEARCH_FIELDS.scope,
  raw: Type.Optional(Type.Boolean({ description: "With entry_ids: the verbatim session entry JSON" })),
  offset: Type.Optional(Type.Number({ description: "Segment start in a long body (from the previous answer)" })),
  raw_limit: Type.Optional(Type.Number({ description: "Segment length in chars (default 4000, at most 12000)" })),
  include_thinking: Type.Optional(Type.Boolean({ description: "Show the model's thinking in a read" })),
};

const SEARCH_KEYS = Object.keys(SEARCH_FIELDS);

/** session_search goes to recall when the model used any recall field. */
export function wantsScopedSearch(params: any): boolean {
  return SEARCH_KEYS.some((k) => params?.[k] !== undefined && params?.[k] !== null && params?.[k] !== "");
}

/** session_read goes to recall for entry ids of the current session (another session's ids use read_entries). */
export function wantsEntryRead(params: any, sessionId: string): boolean {
  const ids = params?.entry_ids;
  const other = params?.session_id && !sessionId.startsWith(String(params.session_id));
  return Array.isArray(ids) && ids.length > 0 && !other;
}

/** One recall through the bridge; the host's session and branch overwrite anything the model sent. */
export async function recallTool(
  call: (method: string, params?: Record<string, unknown>) => Promise<any>,
  ctx: any,
  sessionId: string,
  params: any,
): Promise<{ content: { type: "text"; text: string }[]; details: Record<string, unknown> }> {
  const branchIds = (ctx?.sessionManager?.getBranch?.() ?? []).map((e: any) => e?.id).filter((id: any) => typeof id === "string");
  const r = await call("recall", { session_id: sessionId, branch_ids: branchIds, args: JSON.parse(JSON.stringify(params ?? {})) });
  const result = r?.result ?? {};
  return {
    content: [{ type: "text", text: String(r?.text ?? "") }],
    details: { items: result.items?.length ?? 0, scope: result.scope ?? null, next_page: result.next_page ?? null },
  };
}
