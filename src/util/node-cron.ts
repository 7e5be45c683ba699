// node-cron, loaded on first use: only a site with local schedules (config `schedules`,
// IANA time zones) needs it. It formats every tick through Intl.DateTimeFormat, and that
// pages in ~6.5 MiB of ICU data (docs/sizing.md, where the memory goes); a site without schedules
// never loads either. A synchronous load, so zod refinements can call it.
import { createRequire } from "node:module";
import type NodeCron from "node-cron";

let cron: typeof NodeCron | undefined;

export function nodeCron(): typeof NodeCron {
  return (cron ??= createRequire(import.meta.url)("node-cron") as typeof NodeCron);
}
