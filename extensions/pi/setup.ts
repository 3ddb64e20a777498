// First start: which command runs the Python side (`pi-memory bridge`), and if none can, the one
// line that says how to install it. Pure but for the two facts it is given (the environment and
// whether a file is an executable), so the choice is the same in pi 0.73 and 1.x.
//
// Order: $PI_MEMORY_BRIDGE as given; else `pi-memory` found on PATH. Without either, the hint names
// the installer found on PATH (uv, pipx, else pip) and what to install: this package's own Python
// project when it sits in a checkout of the repository (a `pi install git:...` or a local path),
// else pi-memory by name.
import { accessSync, constants, existsSync } from "node:fs";
import { delimiter, dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

export type BridgeChoice = { command: string[]; found: boolean; hint: string };

export function isExecutable(path: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

export function onPath(name: string, env: NodeJS.ProcessEnv, executable = isExecutable): string | undefined {
  for (const dir of (env.PATH ?? "").split(delimiter)) {
    if (dir && executable(join(dir, name))) return join(dir, name);
  }
  return undefined;
}

export function splitCommand(raw: string): string[] {
  const parts = raw.match(/"[^"]*"|'[^']*'|\S+/g) ?? [];
  return parts.map((p) => (/^["'].*["']$/.test(p) ? p.slice(1, -1) : p));
}

/** The repository's root when this package is inside a checkout of it (it holds pyproject.toml). */
export function pythonProject(packageDir: string | undefined, exists = existsSync): string | undefined {
  if (!packageDir) return undefined;
  const root = resolve(packageDir, "..", "..");
  return exists(join(root, "pyproject.toml")) && exists(join(root, "src", "pi_memory")) ? root : undefined;
}

export function installHint(env: NodeJS.ProcessEnv, project: string | undefined, executable = isExecutable): string {
  const what = project ?? "pi-memory";
  const how = onPath("uv", env, executable)
    ? `uv tool install ${what}`
    : onPath("pipx", env, executable)
      ? `pipx install ${what}`
      : `pip install ${what}`;
  return (
    `pi-memory: the Python side is not installed (no \`pi-memory\` on PATH). Install it with \`${how}\`, ` +
    `or set PI_MEMORY_BRIDGE (e.g. "python3 -m pi_memory bridge").`
  );
}

export function chooseBridge(
  env: NodeJS.ProcessEnv,
  packageDir: string | undefined,
  executable = isExecutable,
  exists = existsSync,
): BridgeChoice {
  const raw = (env.PI_MEMORY_BRIDGE ?? "").trim();
  if (raw) return { command: splitCommand(raw), found: true, hint: "" };
  const found = onPath("pi-memory", env, executable);
  if (found) return { command: ["pi-memory", "bridge"], found: true, hint: "" };
  return { command: ["pi-memory", "bridge"], found: false, hint: installHint(env, pythonProject(packageDir, exists), executable) };
}

/** This file's folder: the installed package's root. */
export function packageDir(): string | undefined {
  try {
    return dirname(fileURLToPath(import.meta.url));
  } catch {
    return undefined;
  }
}
