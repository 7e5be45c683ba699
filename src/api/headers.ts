// Authorization header values, split by hand in linear time: a backtracking regex over a
// header an unauthenticated client controls is a way to stall the event loop.
export const isSpace = (c: number) => c === 0x20 || c === 0x09;
export const isWordChar = (c: number) => (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5a) || (c >= 0x61 && c <= 0x7a) || c === 0x5f;

/** The scheme and the credentials of an Authorization header, split by hand (linear time). */
export function splitAuthorization(header: string): { scheme: string; rest: string } {
  let i = 0;
  while (i < header.length && !isSpace(header.charCodeAt(i))) i++;
  let j = i;
  while (j < header.length && isSpace(header.charCodeAt(j))) j++;
  let k = header.length;
  while (k > j && isSpace(header.charCodeAt(k - 1))) k--;
  return { scheme: header.slice(0, i), rest: header.slice(j, k) };
}

/** The token of `Authorization: Bearer <token>` (one token, no spaces in it), parsed by hand. */
export function bearerToken(h: unknown): string | null {
  if (typeof h !== "string" || h.length > 1024) return null;
  const { scheme, rest } = splitAuthorization(h);
  if (scheme.toLowerCase() !== "bearer" || rest.length === 0) return null;
  for (let i = 0; i < rest.length; i++) if (rest[i] === " " || rest[i] === "\t") return null;
  return rest;
}
