// The options both HTTPS listeners (the API, and the status page's own listener) give
// fastify: the config's TLS files, the connection limits (connection-limits.ts), a body limit, the daemon's logger without a line per
// request (that would wear the SD card; errors are logged by the error handlers), 503 while
// closing, an 8 KiB cap on request headers, and no JSON-schema compilers. Bodies are checked with zod in the handlers, so
// fastify's defaults (ajv and fast-json-stringify, ~0.5 MiB of source loaded when the
// instance is built: docs/sizing.md, where the memory goes) would never run; a route that declares a
// `schema` fails at registration instead of being checked by a second validator.
import { readFileSync } from "node:fs";
import { LogController, type FastifyBaseLogger, type FastifyHttpsOptions, type FastifyServerOptions } from "fastify";
import type { Server } from "node:https";
import type { Logger } from "../log.js";
import { fastifyTimeoutOptions, serverTimeoutOptions, type ConnectionLimits } from "./connection-limits.js";
import { SitegateError } from "../errors.js";

const noSchemas = (what: string) => () => () => {
  throw new SitegateError("INTERNAL", `sitegate routes check bodies with zod; a route ${what} schema is not supported`);
};

export const ZOD_ONLY: FastifyServerOptions["schemaController"] = {
  compilersFactory: { buildValidator: noSchemas("validation"), buildSerializer: noSchemas("response") },
};

/** All request headers together (Node's default is 16 KiB). */
export const MAX_HEADER_BYTES = 8 * 1024;

export function httpsOptions(
  tls: { key: string; cert: string },
  log: Logger,
  bodyLimit: number,
  limits: ConnectionLimits,
): FastifyHttpsOptions<Server> {
  return {
    https: {
      key: readFileSync(tls.key),
      cert: readFileSync(tls.cert),
      // Node's HTTP parser refuses (431) a request whose headers together exceed this, before
      // any JavaScript sees them: no header value an attacker sends can be long.
      maxHeaderSize: MAX_HEADER_BYTES,
      ...serverTimeoutOptions(limits),
    },
    ...fastifyTimeoutOptions(limits),
    bodyLimit,
    loggerInstance: log as unknown as FastifyBaseLogger,
    logController: new LogController({ disableRequestLogging: true }),
    // req.log is the daemon's logger itself, not a pino child made per request for a reqId
    // binding no line would carry (request logging is off): the two handlers that log a
    // failed request add `reqId: req.id` themselves.
    childLoggerFactory: (logger) => logger,
    return503OnClosing: true,
    schemaController: ZOD_ONLY,
  };
}

/**
 * @fastify/rate-limit's headers on both listeners: x-ratelimit-* on the 429 only (with its
 * Retry-After, DESIGN B3). On every other answer they were ~90 bytes no contract names,
 * written and parsed per request (docs/architecture.md, "The API's cost per request").
 */
export const RATE_LIMIT_HEADERS = {
  addHeadersOnExceeding: { "x-ratelimit-limit": false, "x-ratelimit-remaining": false, "x-ratelimit-reset": false },
} as const;
