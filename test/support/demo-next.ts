// The two commands `make run` suggests once its story is done, against its own config and
// gateway: `bin/sitegate events` and the discharge curl of docs/dispatch.md, with the demo's
// real port, certificate and API key. Every line fits 80 columns with the default folder.

/** A path as the shell takes it: relative to the clone when inside it, quoted when it must be. */
function shellPath(path: string, root: string): string {
  const rel = path.startsWith(root + "/") ? path.slice(root.length + 1) : path;
  return /^[\w./+-]+$/.test(rel) ? rel : `'${rel.replaceAll("'", "'\\''")}'`;
}

export interface NextOptions {
  /** the clone, where the commands run */
  root: string;
  config: string;
  caFile: string;
  apiPort: number;
  apiKey: string;
  site: string;
}

/** The heading and the commands, each command line without a prompt (copied as it is). */
export function tryNext(o: NextOptions): string[] {
  return [
    `try next, in another terminal in ${o.root}, while this runs:`,
    `  bin/sitegate events --config ${shellPath(o.config, o.root)}`,
    `  curl --cacert ${shellPath(o.caFile, o.root)} -H 'X-API-Key: ${o.apiKey}' \\`,
    `    -H 'Content-Type: application/json' -d '{"mode": "live", "event_slots": [{`,
    `    "event_id": "'$(cat /proc/sys/kernel/random/uuid)'",`,
    `    "start_time": "'$(date -u -d +10sec +%FT%TZ)'", "event_type": "discharge",`,
    `    "end_time": "'$(date -u -d +70sec +%FT%TZ)'", "event_quantity": 3,`,
    `    "event_unit": "kW", "priority": 10, "mandatory": true,`,
    `    "cancelled": false}]}' https://127.0.0.1:${o.apiPort}/v1/api/gateway/${o.site}/dr`,
  ];
}
