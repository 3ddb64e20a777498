// pi-memory long-term memory for pi: the commands /remember, /memories, /forget, the model tools
// memory_search, memory_read, memory_propose, memory_update, and the user's memories appended to the
// system prompt at `before_agent_start`.
//
// A thin shim over the bridge (`pi_memory.memory.tools.BRIDGE_METHODS`): the tools' names,
// descriptions and JSON schemas and the commands' descriptions come from `memory_start` at session
// start, so nothing is mirrored here, and `memory.enabled: false` in `.pi/pi-memory.json` (or the
// global one) leaves all of it unregistered. Every rule (who may write what, paging and output caps,
// the injected text and its budget) lives in the Python library.
//
// The model never chooses where a memory goes: pi's `ctx.cwd` (the workspace) and the session id are
// put into every request AFTER the model's own parameters, so they always win.
//
// Prompt cache: the injected block is a pure function of the memories, so it is byte-identical from
// turn to turn while they do not change. If the bridge fails, the last block of this session is used
// again (the prompt stays the same), the failure is told once per session, and the turn goes on.
import type { ExtensionAPI } from "@mariozechner/pi-coding-agent";

export type MemoryHost = {
  /** One bridge request (the shared wrapper: queueing, timeouts, restarts). */
  call(method: string, params: Record<string, unknown>): Promise<any>;
  /** The current pi session id ("" before the first session_start). */
  sessionId(): string;
  /** Tell the user (a notification in the TUI / RPC, stderr in print mode). */
  say(ctx: any, text: string, kind?: "info" | "warning" | "error"): void;
};

const START_WAIT_MS = 3000; // session_start waits at most this long for memory_start

function label(name: string): string {
  return name
    .split("_")
    .map((w) => w.charAt(0).toUpperCase() + w.slice(1))
    .join(" ");
}

export function registerMemory(pi: ExtensionAPI, host: MemoryHost): void {
  let cwd = "";
  let enabled = false;
  let known = false; // memory_start answered (a bridge down at session start is asked again at the next turn)
  let warned = false;
  let lastInjection = "";
  const registered = new Set<string>();

  /** The host's workspace and session: spread LAST into every request. */
  const where = (ctx: any) => ({ cwd: ctx?.cwd || cwd, session_id: host.sessionId() || null });

  const warnOnce = (ctx: any, what: string, e: any) => {
    // a dead bridge was already reported once by the archiving side
    if (warned || e?.code === "bridge_down") return;
    warned = true;
    host.say(ctx, `pi-memory: ${what} failed (${e?.message ?? e}); pi keeps working.`, "warning");
  };

  const registerTools = (tools: Record<string, { description: string; parameters: unknown }>) => {
    for (const [name, spec] of Object.entries(tools ?? {})) {
      if (registered.has(name)) continue;
      registered.add(name);
      pi.registerTool({
        name,
        label: label(name),
        description: spec.description,
        parameters: spec.parameters as any, // a plain JSON schema from the library
        async execute(_id: string, params: any, _signal: any, _onUpdate: any, ctx: any) {
          const r = await host.call(name, { ...(params ?? {}), ...where(ctx) });
          return { content: [{ type: "text", text: String(r?.text ?? "") }], details: {} };
        },
      } as any);
    }
  };

  const registerCommands = (commands: Record<string, string>) => {
    for (const [name, description] of Object.entries(commands ?? {})) {
      if (registered.has(`/${name}`)) continue;
      registered.add(`/${name}`);
      pi.registerCommand(name, {
        description,
        handler: async (args: string, ctx: any) => {
          if (!enabled) return host.say(ctx, "pi-memory: memory is turned off (memory.enabled in pi-memory.json)");
          try {
            const r = await host.call("memory_command", { name, args: args ?? "", ...where(ctx) });
            host.say(ctx, String(r?.text ?? ""));
          } catch (e: any) {
            host.say(ctx, `pi-memory: /${name}: ${e?.message ?? e}`, "error");
          }
        },
      } as any);
    }
  };

  const start = (ctx: any): Promise<void> =>
    host
      .call("memory_start", where(ctx))
      .then((r: any) => {
        known = true;
        enabled = Boolean(r?.enabled);
        if (!enabled) return;
        registerTools(r.tools);
        registerCommands(r.commands);
      })
      .catch((e: any) => warnOnce(ctx, "starting long-term memory", e));

  pi.on("session_start", async (_event: any, ctx: any) => {
    cwd = ctx.cwd;
    warned = false;
    known = false;
    lastInjection = "";
    await Promise.race([start(ctx), new Promise((r) => setTimeout(r, START_WAIT_MS).unref())]);
  });

  pi.on("before_agent_start", async (event: any, ctx: any) => {
    if (!known) await start(ctx);
    if (!enabled) return;
    let block = lastInjection;
    try {
      block = String((await host.call("memory_injection", where(ctx)))?.text ?? "");
      lastInjection = block;
    } catch (e: any) {
      warnOnce(ctx, "reading long-term memories", e);
    }
    if (block) return { systemPrompt: `${event.systemPrompt}\n\n${block}` };
  });
}
