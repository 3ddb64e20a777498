// Check pi-memory's compaction plans against REAL pi (0.73.x or 1.x): for every entry of each
// session as the proposed cut, ask `pi_memory.compact.plan.timed_plan` for a plan, commit it with
// pi's own SessionManager.appendCompaction, rebuild pi's LLM context (convertToLlm) and check that
// every tool result follows its call, every ordinary call has its result, and our checkpoint leads.
//
//   node bench/compact_pi_check.mjs PI_PACKAGE_DIR PYTHON SESSION.jsonl ...
//   (PI_PACKAGE_DIR: node_modules/@mariozechner/pi-coding-agent or @earendil-works/pi-coding-agent;
//    PYTHON: an interpreter that can import pi_memory)
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { pathToFileURL } from "node:url";

const [piDir, python, ...files] = process.argv.slice(2);
if (!piDir || !python || files.length === 0) {
  console.error("usage: node bench/compact_pi_check.mjs PI_PACKAGE_DIR PYTHON SESSION.jsonl ...");
  process.exit(2);
}
const pi = await import(pathToFileURL(path.join(piDir, "dist/index.js")).href);
const { prepareCompaction } = await import(pathToFileURL(path.join(piDir, "dist/core/compaction/compaction.js")).href);
const PLAN = "import sys,json; from pi_memory.compact.plan import timed_plan; print(json.dumps(timed_plan(json.load(sys.stdin))))";

function openCopy(file) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "pi-compact-check-"));
  const copy = path.join(dir, path.basename(file));
  fs.copyFileSync(file, copy);
  return pi.SessionManager.open(copy, dir);
}

function pairingProblems(messages) {
  const seen = new Set();
  const pending = new Set();
  const problems = [];
  for (const m of messages) {
    if (m.role === "assistant") {
      for (const b of m.content) {
        if (b.type !== "toolCall") continue;
        seen.add(b.id);
        if (m.stopReason !== "error" && m.stopReason !== "aborted") pending.add(b.id);
      }
    } else if (m.role === "toolResult") {
      if (!seen.has(m.toolCallId)) problems.push(`orphan result ${m.toolCallId}`);
      pending.delete(m.toolCallId);
    }
  }
  for (const id of pending) problems.push(`unanswered call ${id}`);
  return problems;
}

let failures = 0;
for (const file of files) {
  const branch = openCopy(file).getBranch();
  const prep = prepareCompaction(branch, { enabled: true, reserveTokens: 16384, keepRecentTokens: 1 });
  const stats = { file: path.basename(file), entries: branch.length, planned: 0, moved: 0, cancelled: 0, bad: [] };
  for (const entry of prep ? branch : []) {
    const sm = openCopy(file);
    const input = JSON.stringify({ branchEntries: sm.getBranch(), preparation: { ...prep, firstKeptEntryId: entry.id } });
    const out = JSON.parse(execFileSync(python, ["-c", PLAN], { input }).toString());
    if (out.cancel) {
      stats.cancelled++;
      continue;
    }
    const c = out.compaction;
    stats.planned++;
    if (c.details.movedBoundary) stats.moved++;
    sm.appendCompaction(c.summary, c.firstKeptEntryId, c.tokensBefore, c.details, true);
    const llm = pi.convertToLlm(sm.buildSessionContext().messages);
    const problems = pairingProblems(llm);
    if (!llm.slice(0, 3).some((m) => JSON.stringify(m.content).includes("pi-memory checkpoint"))) {
      problems.push("the checkpoint does not lead the context");
    }
    if (problems.length) stats.bad.push({ cut: entry.id, kept: c.firstKeptEntryId, problems });
  }
  failures += stats.bad.length;
  console.log(JSON.stringify(stats));
}
process.exit(failures ? 1 : 0);
