// The fleet's command inbox: a publish on {prefix}/{site_id}/cmd/{name} is checked (not
// retained, a response topic below our own reply/, its size, its signature and nonce when
// commands must be signed), run by commands.ts, and answered on its response topic.
// Commands not run are counted by reason and logged within a budget (forgeries come in floods).
import type { IClientPublishOptions, IPublishPacket } from "mqtt";
import type { FleetConfig } from "../config/schema.js";
import { SitegateError, errorMessage } from "../errors.js";
import { LogBudget } from "../util/log-budget.js";
import { COMMANDS, failure, runCommand, type CommandAnswer, type CommandDeps } from "./commands.js";
import type { NonceStore } from "./nonces.js";
import { CommandVerifier, type Verdict } from "./signing.js";

const MAX_CONCURRENT_COMMANDS = 8;
export const MAX_COMMAND_BYTES = 256 * 1024;

export interface InboxDeps extends CommandDeps {
  fleet: FleetConfig;
  nonces: NonceStore;
}

export type QoS1 = (topic: string, payload: string, opts: IClientPublishOptions, done: (err?: Error) => void) => void;

export class CommandInbox {
  /** Commands received with a response topic of ours. */
  commands = 0;
  private busyCommands = 0;
  /** Commands not run, by reason. */
  readonly refused = new Map<string, number>();
  private readonly refusedLog = new LogBudget();
  /** Set when fleet.command_keys is: then every command must be signed. */
  private readonly verifier: CommandVerifier | null;

  constructor(
    private readonly deps: InboxDeps,
    private readonly topic: (sub: string) => string,
    private readonly publish: QoS1,
  ) {
    this.verifier = deps.fleet.command_keys ? new CommandVerifier(deps.fleet.command_keys, deps.fleet.command_max_age_s) : null;
  }

  /** What `fleet uplink started` says about signing. */
  get signing(): string {
    const f = this.deps.fleet;
    return this.verifier
      ? `required (${f.command_keys!.length} key(s), max age ${f.command_max_age_s} s)`
      : "not required (the broker ACL is the only gate)";
  }

  /** A publish on cmd/{name}: checked, run, and answered on its response topic. */
  receive(topic: string, payload: Buffer, packet: IPublishPacket): void {
    const { log } = this.deps;
    const prefix = this.topic("cmd/");
    const name = topic.startsWith(prefix) ? topic.slice(prefix.length) : topic;
    const responseTopic = packet.properties?.responseTopic;
    const correlationData = packet.properties?.correlationData;
    if (packet.retain) {
      // A retained command would run again at every reconnect.
      this.refuse("retained", { topic }, "retained command ignored (commands must not be retained)");
      return;
    }
    if (!responseTopic) {
      this.refuse("no_response_topic", { topic }, "command without a response topic ignored");
      return;
    }
    // Answers go only below our own reply/ topic: a command must not make the gateway
    // publish on its status, telemetry or events (or anywhere else the broker lets it).
    const replyPrefix = this.topic("reply/");
    if (/[+#]/.test(responseTopic) || !responseTopic.startsWith(replyPrefix) || responseTopic.length === replyPrefix.length) {
      this.refuse(
        "response_topic",
        { topic, response_topic: responseTopic.slice(0, 200), allowed: `${replyPrefix}...` },
        "command with a response topic outside reply/ ignored",
      );
      return;
    }
    this.commands++;
    const answer = (a: CommandAnswer) => {
      if (a.status >= 400)
        this.refuse(String(a.status), { command: name.slice(0, 100), error: a.body.error, message: a.body.message }, "command refused");
      else log.debug({ command: name }, "command answered");
      this.publish(
        responseTopic,
        JSON.stringify(a.body),
        {
          retain: false,
          properties: { ...(correlationData ? { correlationData } : {}), contentType: "application/json" },
        },
        (err) => {
          if (err)
            log.warn({ command: name, response_topic: responseTopic, err: errorMessage(err) }, "command answer not accepted by the broker");
        },
      );
    };
    /** Refused or failed: the B3 error body from the one table (services/errors.ts). */
    const fail = (e: unknown) => answer(failure(name, e, this.deps));
    if (payload.length > MAX_COMMAND_BYTES)
      return fail(new SitegateError("PAYLOAD_TOO_LARGE", `the payload is over ${MAX_COMMAND_BYTES / 1024} KiB`));
    // Signed commands: signature and age before the payload is even parsed.
    let verdict: Verdict | null = null;
    if (this.verifier) {
      verdict = this.verifier.check(this.deps.config.site_id, name, payload, packet.properties?.userProperties, Date.now());
      if (!verdict.ok) return fail(new SitegateError("UNAUTHORIZED", verdict.message));
    }
    let body: unknown;
    if (payload.length > 0) {
      try {
        body = JSON.parse(payload.toString("utf8"));
      } catch {
        return fail(new SitegateError("INVALID_REQUEST", "the payload is not JSON"));
      }
    }
    if (!(COMMANDS as readonly string[]).includes(name))
      return fail(new SitegateError("NOT_FOUND", `no command "${name}" (known: ${COMMANDS.join(", ")})`));
    if (this.busyCommands >= MAX_CONCURRENT_COMMANDS)
      return fail(new SitegateError("UNAVAILABLE", "too many commands in progress; try again"));
    if (verdict?.ok) {
      const refused = this.claimNonce(verdict, name);
      if (refused) return fail(refused);
    }
    const r = runCommand(name, body, this.deps);
    if (!(r instanceof Promise)) return answer(r);
    this.busyCommands++;
    r.then(answer, fail).finally(() => this.busyCommands--);
  }

  /** Counts a command that is not run and logs it within the budget; the count says how many lines were held back. */
  private refuse(reason: string, fields: Record<string, unknown>, msg: string): void {
    this.refused.set(reason, (this.refused.get(reason) ?? 0) + 1);
    const held = this.refusedLog.take();
    if (held === null) return;
    this.deps.log.warn(
      { ...fields, reason, ...(held ? { not_logged_since_last: held } : {}) },
      `${msg} (further refusals within a minute only counted in sitegate_fleet_commands_refused_total)`,
    );
  }

  /** A signed command's nonce, committed before the command runs (a replay, even after a restart, finds it); the refusal when it may not run. */
  private claimNonce(verdict: Extract<Verdict, { ok: true }>, name: string): SitegateError | null {
    let claim;
    try {
      claim = this.deps.nonces.claimNonce(verdict.nonce, verdict.expiresAt, Date.now());
    } catch (e) {
      this.deps.log.error({ command: name, err: errorMessage(e) }, "cannot store the command's nonce; not run");
      return new SitegateError("STORAGE_UNAVAILABLE", "storage cannot commit now; the command was not run");
    }
    if (claim === "replayed")
      return new SitegateError(
        "CONFLICT",
        `nonce ${verdict.nonce} was used before; a signed command runs once (sign it again with a new nonce)`,
      );
    if (claim === "full") return new SitegateError("UNAVAILABLE", "too many signed commands within command_max_age_s; try again later");
    return null;
  }
}
