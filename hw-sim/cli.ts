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

const usage =
  "usage: sitegate-sim --scenario FILE|brands [--base-dir DIR]\n       sitegate-sim --replay dump.json [--listen HOST:PORT]\n  RTU paths in the scenario resolve against --base-dir (default: the current directory).\n  `brands`: the site of every brand device model, built from the brand table.\n  --replay: a `sitegate dump` capture served as a frozen device on Modbus TCP (default 127.0.0.1:1502).";

async function main(): Promise<number> {
  let values;
  try {
    ({ values } = parseArgs({
      options: {
        scenario: { type: "string", short: "s" },
        "base-dir": { type: "string" },
        replay: { type: "string" },
        listen: { type: "string" },
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
  if (values.replay) return replay(values.replay, values.listen ?? "127.0.0.1:1502");
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

/** `--replay`: one capture on one TCP port until a signal. */
async function replay(file: string, listen: string): Promise<number> {
  const m = /^(.+):(\d{1,5})$/.exec(listen);
  if (!m || Number(m[2]) > 65535) {
    process.stderr.write(`sitegate-sim: --listen must be HOST:PORT, not "${listen}"\n${usage}\n`);
    return 2;
  }
  let capture;
  try {
    capture = loadCapture(resolve(file));
  } catch (e) {
    process.stderr.write(`sitegate-sim: ${(e as Error).message}\n`);
    return 2;
  }
  const served = await startReplay(capture, m[1], Number(m[2]));
  process.stdout.write(
    `sitegate-sim: replaying ${file} (profile ${capture.profile}, unit ${capture.unit}) on tcp://${m[1]}:${served.port}\n`,
  );
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
