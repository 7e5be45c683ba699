#!/usr/bin/env node
// `sitegate-sim --scenario FILE`: a simulated energy site on the bench.
import "../src/node-guard.js";
import { parseArgs } from "node:util";
import { dirname, resolve } from "node:path";
import { pino } from "pino";
import { startSim } from "./sim.js";
import { BRANDS_SCENARIO, brandsScenario } from "./models/brands/site.js";
import { untilSignal } from "../src/util/process.js";
import { loadCapture, startReplay } from "./replay.js";
import { replayDevice, startPhysicsReplay } from "./replay-physics.js";

const usage =
  'usage: sitegate-sim --scenario FILE|brands [--base-dir DIR]\n       sitegate-sim --replay dump.json [--physics [--control HOST:PORT]] [--listen HOST:PORT]\n  RTU paths in the scenario resolve against --base-dir (default: the current directory).\n  `brands`: the site of every brand device model, built from the brand table.\n  --replay: a `sitegate dump` capture served as a frozen device on Modbus TCP (default 127.0.0.1:1502).\n  --physics: the capture with its brand model\'s physics on top (a charge moves power and SOC); the control API on --control (default 127.0.0.1:15082), the device named "replay".';

async function main(): Promise<number> {
  let values;
  try {
    ({ values } = parseArgs({
      options: {
        scenario: { type: "string", short: "s" },
        "base-dir": { type: "string" },
        replay: { type: "string" },
        listen: { type: "string" },
        physics: { type: "boolean" },
        control: { type: "string" },
        help: { type: "boolean", short: "h" },
      },
      strict: true,
    }));
  } catch (e) {
    process.stderr.write(`sitegate-sim: ${(e as Error).message}\n${usage}\n`);
    return 2;
  }
  if (values.help) {
    process.stdout.write(usage + "\n");
    return 0;
  }
  if (values.replay)
    return replay(values.replay, values.listen ?? "127.0.0.1:1502", values.physics ? (values.control ?? "127.0.0.1:15082") : undefined);
  if (!values.scenario) {
    process.stderr.write(`sitegate-sim: --scenario is required\n${usage}\n`);
    return 2;
  }
  const pretty = process.stdout.isTTY && process.env.LOG_FORMAT !== "json";
  const log = pino({
    level: process.env.LOG_LEVEL ?? "info",
    base: { name: "sitegate-sim" },
    // ISO times, as the daemon logs them: one time format across a bench's logs.
    timestamp: pino.stdTimeFunctions.isoTime,
    ...(pretty ? { transport: { target: "pino-pretty", options: { translateTime: "SYS:HH:MM:ss.l" } } } : {}),
  });
  let sim;
  try {
    const scenario = values.scenario === BRANDS_SCENARIO ? brandsScenario() : resolve(values.scenario);
    sim = await startSim(scenario, { baseDir: values["base-dir"] ? resolve(values["base-dir"]) : process.cwd(), log });
  } catch (e) {
    process.stderr.write(`sitegate-sim: ${(e as Error).message}\n`);
    return /scenario is invalid|ENOENT/.test((e as Error).message) ? 2 : 1;
  }
  log.info({ control: sim.controlUrl, tcp: sim.tcpPorts, rtu: sim.rtuPeers, scenario: dirname(values.scenario) }, "simulator running");
  await untilSignal();
  await sim.stop();
  log.info("simulator stopped");
  return 0;
}

/** `--replay`: one capture on one TCP port until a signal; with `control`, the brand model's physics on top. */
async function replay(file: string, listen: string, control: string | undefined): Promise<number> {
  for (const [flag, v] of [
    ["--listen", listen],
    ["--control", control],
  ] as const) {
    const m = v === undefined ? null : /^(.+):(\d{1,5})$/.exec(v);
    if (v !== undefined && (!m || Number(m[2]) > 65535)) {
      process.stderr.write(`sitegate-sim: ${flag} must be HOST:PORT, not "${v}"\n${usage}\n`);
      return 2;
    }
  }
  const [host, port] = [listen.slice(0, listen.lastIndexOf(":")), Number(listen.slice(listen.lastIndexOf(":") + 1))];
  let capture;
  try {
    capture = loadCapture(resolve(file));
    if (control !== undefined) replayDevice(capture); // a profile without a brand model: said before anything opens
  } catch (e) {
    process.stderr.write(`sitegate-sim: ${(e as Error).message}\n`);
    return 2;
  }
  const what = `${file} (profile ${capture.profile}, unit ${capture.unit})`;
  if (control !== undefined) {
    const sim = await startPhysicsReplay(capture, listen, control);
    process.stdout.write(
      `sitegate-sim: replaying ${what} with its model's physics on tcp://${host}:${sim.tcpPorts[0]}, control API ${sim.controlUrl}\n`,
    );
    await untilSignal();
    await sim.stop();
    return 0;
  }
  const served = await startReplay(capture, host, port);
  process.stdout.write(`sitegate-sim: replaying ${what} on tcp://${host}:${served.port}\n`);
  await untilSignal();
  await served.stop();
  return 0;
}

main().then(
  (c) => (process.exitCode = c),
  (e) => {
    process.stderr.write(`sitegate-sim: ${(e as Error).stack ?? String(e)}\n`);
    process.exitCode = 1;
  },
);
