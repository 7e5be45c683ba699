// The child side of in-child.ts: imports the module, calls the function, sends its result
// (without its `stop` member) to the parent, and exits; a server (a result with `stop()`)
// stays up until the parent says "stop".
type Fn = (arg: unknown) => Promise<unknown>;

process.once("message", (msg: { moduleUrl: string; fn: string; arg: unknown }) => {
  void (async () => {
    try {
      const mod = (await import(msg.moduleUrl)) as Record<string, Fn>;
      const out = await mod[msg.fn](msg.arg);
      const server =
        out !== null && typeof out === "object" && typeof (out as { stop?: unknown }).stop === "function"
          ? (out as { stop: () => Promise<void> })
          : null;
      if (!server) {
        process.send!({ result: out }, () => process.exit(0));
        return;
      }
      process.send!({ result: Object.fromEntries(Object.entries(server).filter(([k]) => k !== "stop")) });
      process.once("message", () => {
        void server.stop().finally(() => process.exit(0));
      });
    } catch (e) {
      process.send!({ error: (e as Error).stack ?? String(e) }, () => process.exit(1));
    }
  })();
});
