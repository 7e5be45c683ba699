// Loaded into a daemon under test with `node --import` (systemd-notify.test.ts): on SIGUSR2
// it sends STATUS=test: blocking... and then stalls the event loop for BLOCK_MS, so a test
// sees the watchdog's stall check withhold pings. A production daemon never loads it.
import { execFileSync } from "node:child_process";

export const BLOCK_MS = 3000;

function busyWait(ms: number): void {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    /* the event loop is stalled on purpose */
  }
}

/** True while a child process (the daemon's own systemd-notify) is still running. */
const childRunning = () => process.getActiveResourcesInfo().includes("ProcessWrap");

async function block(): Promise<void> {
  // A ping already handed to systemd-notify arrives before the marker, so every ping the
  // test sees after the marker was sent during or after the stall.
  for (let waited = 0; childRunning() && waited < 5000; waited += 5) await new Promise((r) => setTimeout(r, 5));
  const command = process.env.SITEGATE_SYSTEMD_NOTIFY ?? "systemd-notify";
  execFileSync(command, [`STATUS=test: blocking the event loop for ${BLOCK_MS} ms`], { timeout: 5000 });
  busyWait(BLOCK_MS);
}

process.on("SIGUSR2", () => void block());
