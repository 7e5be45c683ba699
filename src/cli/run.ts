// `sitegate run`: the daemon in the foreground until SIGTERM or SIGINT.
import { CONFIG_OPTION, EXIT_FAILURE, EXIT_OK, configFile, type Command } from "./command.js";
import { configWarnings, loadConfig } from "../load-config.js";
import { createLogger } from "../log.js";
import { buildDaemon } from "../daemon.js";
import { STOP_BUDGET_MS, STOP_EXIT_MS } from "../lifecycle.js";
import { untilSignal } from "../util/process.js";
import { readableByOthers, secretFiles } from "../config/secret-files.js";
import { unfinishedConfig, unfinishedLines } from "../config/unfinished.js";

const command: Command = {
  summary: "Start the gateway daemon.",
  usage: "sitegate run [--config FILE]",
  options: CONFIG_OPTION,
  async run(values) {
    const path = configFile(values);
    const config = loadConfig(path);
    const log = createLogger({ level: config.log_level });
    for (const { file, mode } of readableByOthers(secretFiles(path, config))) {
      log.warn({ file, mode }, "secrets readable by other users: chmod o-r (the config is installed 0640 root:sitegate)");
    }
    for (const warning of configWarnings(config)) log.warn({ warning }, "config: kept as it is");
    // goes on (a bench may want it); /healthz says degraded while any is left
    for (const warning of unfinishedLines(unfinishedConfig(config))) log.warn({ warning }, "config: unfinished, set it for the site");
    const daemon = buildDaemon(config, log);
    try {
      await daemon.start();
    } catch (e) {
      log.fatal({ err: e }, "gateway failed to start");
      await new Promise((r) => setTimeout(r, 50)); // let the log line flush
      return EXIT_FAILURE;
    }
    log.info({ site_id: config.site_id }, "gateway running");
    const signal = await untilSignal((again) => log.warn({ signal: again }, "already stopping: putting the devices back first"));
    log.info({ signal, budget_ms: STOP_BUDGET_MS }, "stopping");
    const hardStop = setTimeout(() => {
      log.error({ exit_after_ms: STOP_EXIT_MS }, "stop did not finish; exiting");
      process.exit(EXIT_FAILURE);
    }, STOP_EXIT_MS);
    hardStop.unref();
    await daemon.stop();
    log.info("stopped");
    return EXIT_OK;
  },
};
export default command;
