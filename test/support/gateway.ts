// withGateway: the real daemon (every part) in this process, on a free HTTPS port,
// with an HTTPS client that trusts the test certificate.
import { Agent, request } from "undici";
import { buildDaemon, type Daemon, type DaemonOptions } from "../../src/daemon.js";
import { silentLogger } from "../../src/log.js";
import type { ConfigInput } from "../../src/config/schema.js";
import type { ApiServer } from "../../src/api/server.js";
import { testConfig, TEST_API_KEY, TEST_ORG, TEST_PASSWORD } from "./config.js";
import { testCert } from "./tls.js";

/** A request to the gateway's HTTPS API: a JSON `body`, a `form`, or `raw` text. */
export interface CallOptions {
  body?: unknown;
  form?: Record<string, string>;
  headers?: Record<string, string>;
  raw?: string;
  /** Abort the request after this long (none by default). */
  timeoutMs?: number;
}

export interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  json: any;
  text: string;
}

export interface Gateway {
  daemon: Daemon;
  url: string;
  call(method: string, path: string, opts?: CallOptions): Promise<Answer>;
  token(): Promise<string>;
  apiKeyHeaders: Record<string, string>;
  /** PUT of `devices` to the configure route (site-001), as the partner: `auth`, or a fresh bearer token. */
  configure(devices: unknown[], auth?: Record<string, string>): Promise<Answer>;
  /** GET of device sync (site-001) with the API key. */
  deviceSync(): Promise<Answer>;
  stop(): Promise<void>;
}

let agent: Agent | null = null;
function httpsAgent(): Agent {
  agent ??= new Agent({ connect: { ca: testCert().cert }, keepAliveTimeout: 1000 });
  return agent;
}

/** `method` `base + path` over HTTPS trusting the test certificate; the body parsed when it is JSON. */
export async function httpsCall(base: string, method: string, path: string, o: CallOptions = {}): Promise<Answer> {
  let body: string | undefined;
  const headers: Record<string, string> = { ...(o.headers ?? {}) };
  if (o.raw !== undefined) body = o.raw;
  else if (o.form) {
    body = new URLSearchParams(o.form).toString();
    headers["content-type"] ??= "application/x-www-form-urlencoded";
  } else if (o.body !== undefined) {
    body = JSON.stringify(o.body);
    headers["content-type"] ??= "application/json";
  }
  const signal = o.timeoutMs === undefined ? undefined : AbortSignal.timeout(o.timeoutMs);
  const res = await request(base + path, { method: method as "GET", body, headers, dispatcher: httpsAgent(), signal });
  const text = await res.body.text();
  let json: unknown = null;
  try {
    json = JSON.parse(text);
  } catch {
    json = null;
  }
  return { status: res.statusCode, headers: res.headers, json, text };
}

/** A partner access token from `base`'s token endpoint (the password grant of the test config). */
export async function partnerToken(base: string, timeoutMs?: number): Promise<string> {
  const r = await httpsCall(base, "POST", "/connect/token", {
    form: { grant_type: "password", client_id: "partner-portal", username: "partner", password: TEST_PASSWORD },
    timeoutMs,
  });
  if (r.status !== 200) throw new Error(`token: ${r.status} ${r.text}`);
  return r.json.access_token as string;
}

export async function startGateway(dataDir: string, over: Partial<ConfigInput> = {}, opts: DaemonOptions = {}): Promise<Gateway> {
  const config = testConfig(dataDir, over);
  const daemon = buildDaemon(config, silentLogger(), opts);
  await daemon.start();
  const api = daemon.part<ApiServer>("api");
  const url = api.url;
  const call: Gateway["call"] = (method, path, o = {}) => httpsCall(url, method, path, o);
  const apiKeyHeaders = { "x-api-key": TEST_API_KEY };
  const token = () => partnerToken(url);
  return {
    daemon,
    url,
    call,
    apiKeyHeaders,
    token,
    configure: async (devices, auth) =>
      call("PUT", configurePath(), { headers: auth ?? { authorization: `Bearer ${await token()}` }, body: { devices } }),
    deviceSync: () => call("GET", "/v1/api/gateway/site-001/devicesync", { headers: apiKeyHeaders }),
    stop: () => daemon.stop(),
  };
}

export const configurePath = (org = TEST_ORG, site = "site-001") =>
  `/gateway/admin/device/configure?organizationId=${org}&moleculeId=${site}`;

/** A configure-request device on the simulator's TCP port. */
export function tcpDevice(id: string, port: number, unit: number, integration = "sunspec", extra: Record<string, unknown> = {}) {
  return {
    device_id: id,
    device_type: "modbus",
    device_name: id,
    device_integration: `${TEST_ORG}/${integration}`,
    mb_type: 2,
    mb_device_type: 99,
    mb_ip: "127.0.0.1",
    mb_port: port,
    mb_slave_id: unit,
    ...extra,
  };
}

export function rtuDevice(id: string, unit: number, integration: string, extra: Record<string, unknown> = {}) {
  return {
    device_id: id,
    device_type: "modbus",
    device_name: id,
    device_integration: `${TEST_ORG}/${integration}`,
    mb_type: 1,
    mb_device_type: 99,
    mb_slave_id: unit,
    mb_baud: 9600,
    mb_rtu_no: 1,
    ...extra,
  };
}

type SiteGatewayTest = (site: import("./site.js").SimHandle, gw: Gateway, dir: string) => Promise<void>;

/**
 * A simulated site and a gateway on it for one test, both always stopped; `over` (the
 * gateway's config over the test config) may depend on the site (its ports and pty paths).
 */
export async function withSiteGateway(scenario: import("./site.js").ScenarioInput, fn: SiteGatewayTest): Promise<void>;
export async function withSiteGateway(
  scenario: import("./site.js").ScenarioInput,
  over: (site: import("./site.js").SimHandle) => Partial<ConfigInput>,
  fn: SiteGatewayTest,
): Promise<void>;
export async function withSiteGateway(
  scenario: import("./site.js").ScenarioInput,
  overOrFn: ((site: import("./site.js").SimHandle) => Partial<ConfigInput>) | SiteGatewayTest,
  maybeFn?: SiteGatewayTest,
): Promise<void> {
  const { withSite } = await import("./site.js");
  const { withTmpDir } = await import("./tmp.js");
  const over = maybeFn ? (overOrFn as (site: import("./site.js").SimHandle) => Partial<ConfigInput>) : () => ({});
  const fn = maybeFn ?? (overOrFn as SiteGatewayTest);
  await withSite(scenario, (site) =>
    withTmpDir(async (dir) => {
      const gw = await startGateway(dir, over(site));
      try {
        await fn(site, gw, dir);
      } finally {
        await gw.stop();
      }
    }),
  );
}

/** A gateway on a fresh data_dir for one test, always stopped; `over` may depend on the dir. */
export async function withGateway(
  fn: (gw: Gateway, dir: string) => Promise<void>,
  over: Partial<ConfigInput> | ((dir: string) => Partial<ConfigInput>) = {},
  opts: DaemonOptions = {},
): Promise<void> {
  const { withTmpDir } = await import("./tmp.js");
  await withTmpDir(async (dir) => {
    const gw = await startGateway(dir, typeof over === "function" ? over(dir) : over, opts);
    try {
      await fn(gw, dir);
    } finally {
      await gw.stop();
    }
  });
}

/** Authorization header with a fresh token. */
export async function bearer(gw: Gateway): Promise<Record<string, string>> {
  return { authorization: `Bearer ${await gw.token()}` };
}
