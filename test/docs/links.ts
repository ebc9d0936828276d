// Links in Markdown pages and docs pointers in source comments, read as GitHub renders and resolves them
// (docs/contributing/conventions.md#links). Pure: the test that uses it reads the files.

/** GitHub's anchor for a heading's text: lower case, punctuation dropped (not `-` or `_`), each space a hyphen. */
export function slug(heading: string): string {
  const text = heading
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1') // a link's text
    .replace(/<[^>]+>/g, '') // inline HTML
    .replace(/[`*]/g, '');
  return text
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{M}\p{N}\p{Pc}\- ]/gu, '')
    .replace(/ /g, '-');
}

/** Each line outside fenced code blocks, with its 1-based number. */
function proseLines(markdown: string): Array<[number, string]> {
  const out: Array<[number, string]> = [];
  let fence: string | undefined;
  markdown.split('\n').forEach((line, i) => {
    const open = /^\s*(`{3,}|~{3,})/.exec(line);
    if (open) {
      if (fence === undefined) fence = open[1];
      else if (line.trim().startsWith(fence)) fence = undefined;
      return;
    }
    if (fence === undefined) out.push([i + 1, line]);
  });
  return out;
}

/** The anchors a page's headings make, duplicates numbered as GitHub numbers them (`-1`, `-2`). */
export function anchorsOf(markdown: string): Set<string> {
  const seen = new Map<string, number>();
  const anchors = new Set<string>();
  for (const [, line] of proseLines(markdown)) {
    const heading = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (!heading) continue;
    const base = slug(heading[1]!);
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    anchors.add(n === 0 ? base : `${base}-${n}`);
  }
  return anchors;
}

export interface Link {
  line: number;
  target: string;
}

/** The relative links and anchors of a page (`[text](target)`), outside code; absolute URLs are left out. */
export function linksOf(markdown: string): Link[] {
  const links: Link[] = [];
  for (const [line, text] of proseLines(markdown)) {
    const prose = text.replace(/`[^`]*`/g, '');
    for (const m of prose.matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)) {
      const target = m[1]!;
      if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue;
      links.push({ line, target });
    }
  }
  return links;
}

/** Pointers into the docs in a source file: `docs/<page>.md` or `docs/<page>.md#anchor`. */
export function docsPointersOf(source: string): Link[] {
  const links: Link[] = [];
  source.split('\n').forEach((text, i) => {
    for (const m of text.matchAll(/(?<![\w./-])(docs\/[\w./-]+\.md(?:#[\w-]+)?)/g)) links.push({ line: i + 1, target: m[1]! });
  });
  return links;
}

/**
 * Pointers to a section of the README, the form source comments used before the docs had pages:
 * `README, "Section"`, `README "Section"`, `README: "Section"`, the quote maybe on the next comment line.
 */
export function readmePointersOf(source: string): Link[] {
  const links: Link[] = [];
  const lines = source.split('\n');
  for (const m of source.matchAll(/README[,:]?[ \t]*(?:\n[ \t]*(?:\/\/|#|\*)?[ \t]*)?"/g)) {
    const line = source.slice(0, m.index).split('\n').length;
    links.push({ line, target: lines[line - 1]!.trim() });
  }
  return links;
}
