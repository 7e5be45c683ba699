// A terminal's text as a PNG, for the docs: `tmux capture-pane -p` output in a dark <pre>,
// rendered by headless Chromium (docs/demo-terminal.png is made this way, docs/simulator.md).
//   node dist/test/support/terminal-shot.js PANE.txt OUT.png
import { readFileSync } from "node:fs";
import { launchBrowser } from "./browser.js";

async function main(): Promise<void> {
  const [input, output] = process.argv.slice(2);
  if (!input || !output) throw new Error("usage: terminal-shot PANE.txt OUT.png");
  const text = readFileSync(input, "utf8").replace(/\s+$/, "");
  const esc = text.replace(/[&<>]/g, (c) => `&#${c.charCodeAt(0)};`);
  const html = `<!doctype html><meta charset="utf-8"><style>
    body { margin: 0; background: #1e1e1e; }
    pre { margin: 0; padding: 14px 16px; color: #e6e6e6; font: 13px/1.35 "DejaVu Sans Mono", monospace; display: inline-block; }
  </style><pre>${esc}</pre>`;
  const browser = await launchBrowser();
  try {
    const page = await browser.newPage({ viewport: { width: 800, height: 200 }, deviceScaleFactor: 1 });
    await page.setContent(html);
    await page.locator("pre").screenshot({ path: output });
  } finally {
    await browser.close();
  }
}

main().catch((e) => {
  process.stderr.write(`terminal-shot: ${(e as Error).message}\n`);
  process.exit(1);
});
