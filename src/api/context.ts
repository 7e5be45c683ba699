// What the API's route plugins are given: the parts behind the API (ApiDeps, from the
// composition root) plus the credentials the server builds at start. Its own module so
// server.ts and the route files it registers do not import each other.
import type { Config } from "../config/schema.js";
import type { Logger } from "../log.js";
import type { StoragePart } from "../storage/part.js";
import type { DeviceConnector } from "../devices/types.js";
import type { DeviceDirectory } from "../model/device.js";
import type { ProfileRegistry } from "../profiles/registry.js";
import type { DispatchSubmit } from "../dispatch/submit.js";
import type { MetricsSource } from "../metrics.js";
import type { Credentials, TokenStore } from "./auth.js";
import type { ConnectionLimits } from "./connection-limits.js";
import type { GuessLimits } from "./guess-limit.js";

export type { HealthWarning, MetricFamily, MetricsSource } from "../metrics.js";

export interface ApiDeps {
  config: Config;
  storage: StoragePart;
  /** Every device of the site, whatever its family: device sync and /healthz read it. */
  devices: DeviceDirectory;
  connector: DeviceConnector;
  profiles: ProfileRegistry;
  metrics: MetricsSource;
  /** Callback health for /healthz (lanes held because the partner rejects our credentials). */
  uplink?: { health(): { warnings: unknown[] } };
  dispatch: DispatchSubmit;
  log: Logger;
  /** Clock for token expiry; tests move it. */
  now?: () => number;
  /** More route plugins on this listener (the status page when it shares it). */
  plugins?: () => import("fastify").FastifyPluginAsync[];
  /** The username locks, shared with the status page. */
  guesses: GuessLimits;
  /** Tests shorten the timeouts; the daemon keeps CONNECTION_LIMITS. */
  connectionLimits?: Partial<ConnectionLimits>;
}

export interface ApiContext extends ApiDeps {
  credentials: Credentials;
  tokens: TokenStore;
  guesses: GuessLimits;
}
