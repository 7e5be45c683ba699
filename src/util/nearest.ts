// "did you mean ...?": the known word nearest to a mistyped one, by edit distance
// (insertions, deletions, substitutions and swaps of two neighbours each count one).

/** The optimal string alignment distance between a and b. */
export function editDistance(a: string, b: string): number {
  const rows: number[][] = [];
  for (let i = 0; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++) {
      if (i === 0) {
        row.push(j);
        continue;
      }
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let d = Math.min(rows[i - 1]![j]! + 1, row[j - 1]! + 1, rows[i - 1]![j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) d = Math.min(d, rows[i - 2]![j - 2]! + 1);
      row.push(d);
    }
    rows.push(row);
  }
  return rows[a.length]![b.length]!;
}

/**
 * The word of `known` nearest to `word` when it is near enough to be a slip (at most a
 * third of the longer word's letters, at least 2), or one that starts with it (a unit
 * suffix left off: `poll_interval` for `poll_interval_ms`); undefined otherwise.
 */
export function nearest(word: string, known: Iterable<string>): string | undefined {
  let best: { word: string; d: number } | undefined;
  const w = word.toLowerCase();
  for (const k of known) {
    if (k === word) continue;
    const d = k.toLowerCase().startsWith(w) && w.length >= 3 ? 1 : editDistance(w, k.toLowerCase());
    const limit = Math.max(2, Math.floor(Math.max(word.length, k.length) / 3));
    if (d <= limit && (!best || d < best.d)) best = { word: k, d };
  }
  return best?.word;
}
