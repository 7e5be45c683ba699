// Runs one exported function of a bench module in a child node process started with the
// given node flags, so that a reference runs under the same flags as the daemon it is
// compared with (every ratio compares like with like). The function's result comes back
// over IPC. If the result has a `stop()` (a server the parent loads), the child keeps
// running until the parent calls `stop()` on the handle; otherwise it exits at once.
import { fork } from "node:child_process";
import { fileURLToPath } from "node:url";
import { unitCommand } from "../support/site50.js";

export interface ChildHandle<T> {
  result: T;
  pid: number;
  stop(): Promise<void>;
}

/** The unit's node flags and environment, and "no flags" with the same environment. */
export function flagSets(): {
  unit: { nodeArgs: string[]; env: Record<string, string> };
  plain: { nodeArgs: string[]; env: Record<string, string> };
} {
  const unit = unitCommand();
  return { unit, plain: { nodeArgs: [], env: unit.env } };
}

export const flagsLabel = (nodeArgs: string[]) => (nodeArgs.length ? nodeArgs.join(" ") : "no node flags");

export function inChild<T>(
  moduleUrl: string,
  fn: string,
  arg: unknown,
  opts: { nodeArgs: string[]; env?: Record<string, string> },
): Promise<ChildHandle<T>> {
  const child = fork(fileURLToPath(new URL("./child-main.js", import.meta.url)), [], {
    execArgv: opts.nodeArgs,
    env: { ...process.env, ...(opts.env ?? {}) },
    stdio: ["ignore", "inherit", "inherit", "ipc"],
  });
  const exited = new Promise<void>((r) => child.once("exit", () => r()));
  child.on("error", () => {}); // a send to a child that has just exited; `exited` settles it
  return new Promise((resolve, reject) => {
    child.once("exit", (code, signal) => reject(new Error(`bench child ${fn} exited (${code ?? signal}) before answering`)));
    child.once("message", (m: { result?: T; error?: string }) => {
      if (m.error !== undefined) {
        reject(new Error(`bench child ${fn}: ${m.error}`));
        return;
      }
      resolve({
        result: m.result as T,
        pid: child.pid!,
        async stop() {
          if (child.connected) child.send("stop", () => {}); // a one-shot child may be gone already
          await exited;
        },
      });
    });
    child.send({ moduleUrl, fn, arg });
  });
}

/** One-shot: runs fn in a child under the flags and returns its result. */
export async function runInChild<T>(
  moduleUrl: string,
  fn: string,
  arg: unknown,
  opts: { nodeArgs: string[]; env?: Record<string, string> },
): Promise<T> {
  const h = await inChild<T>(moduleUrl, fn, arg, opts);
  await h.stop();
  return h.result;
}
