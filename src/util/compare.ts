// Ordering of ids in API answers and the status page: by UTF-16 code unit, as JSON keys
// sort in most tools. Not localeCompare: the first collation pages in ~2.5 MiB of ICU data
// (docs/sizing.md, where the memory goes), and an id is not a word in a language.
export function byCodeUnit(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
