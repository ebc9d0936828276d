// The docs cannot drift from themselves or from the code that points into them
// (docs/contributing/conventions.md#links): every relative link and #anchor in README.md, CONTRIBUTING.md and
// docs/**/*.md resolves, as GitHub resolves it; every source comment that names a docs page (and section) names one
// that exists; and no source comment points to a README section any longer. Each failure names file:line.
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { projectRoot } from '../../local/paths.ts';
import { anchorsOf, docsPointersOf, linksOf, readmePointersOf, slug } from '../docs/links.ts';

const SKIP = new Set(['node_modules', 'cdk.out']);
const SOURCE = /\.(ts|js|mjs|go|ya?ml|py)$/;

function walk(dir: string, keep: (path: string) => boolean, out: string[] = []): string[] {
  for (const name of readdirSync(dir)) {
    if (name.startsWith('.') || SKIP.has(name)) continue;
    const path = join(dir, name);
    if (statSync(path).isDirectory()) walk(path, keep, out);
    else if (keep(path)) out.push(path);
  }
  return out;
}

const pages = [
  join(projectRoot, 'README.md'),
  join(projectRoot, 'CONTRIBUTING.md'),
  ...walk(join(projectRoot, 'docs'), (p) => p.endsWith('.md')),
];
const sources = walk(projectRoot, (p) => SOURCE.test(p));
const anchors = new Map<string, Set<string>>();
const anchorsIn = (file: string) => {
  if (!anchors.has(file)) anchors.set(file, anchorsOf(readFileSync(file, 'utf8')));
  return anchors.get(file)!;
};
const at = (file: string, line: number) => `${relative(projectRoot, file)}:${line}`;

/** Why `target`, seen from `from`, does not resolve; undefined when it does. */
function broken(from: string, target: string): string | undefined {
  const [path, anchor] = target.split('#', 2) as [string, string | undefined];
  const file = path === '' ? from : resolve(dirname(from), decodeURIComponent(path));
  if (!existsSync(file)) return `${relative(projectRoot, file)} does not exist`;
  if (anchor === undefined) return undefined;
  if (!file.endsWith('.md')) return `#${anchor} points into ${relative(projectRoot, file)}, which is not a page`;
  return anchorsIn(file).has(anchor) ? undefined : `${relative(projectRoot, file)} has no heading #${anchor}`;
}

test('the pages are the ones expected: the front page, CONTRIBUTING.md and docs/, each linked from the index', () => {
  expect(pages.length).toBeGreaterThan(20);
  const index = join(projectRoot, 'docs/README.md');
  const linked = new Set(linksOf(readFileSync(index, 'utf8')).map((l) => resolve(dirname(index), l.target.split('#')[0]!)));
  const unlinked = pages.filter(
    (p) => p.startsWith(join(projectRoot, 'docs')) && p !== index && !linked.has(p) && !p.includes('/decisions/'),
  );
  expect(unlinked.map((p) => relative(projectRoot, p))).toEqual([]);
});

test('every relative link and #anchor in README.md, CONTRIBUTING.md and docs/**/*.md resolves', () => {
  const problems = pages.flatMap((page) =>
    linksOf(readFileSync(page, 'utf8')).flatMap(({ line, target }) => {
      const why = broken(page, target);
      return why ? [`${at(page, line)}: ${target}: ${why}`] : [];
    }),
  );
  expect(problems).toEqual([]);
});

test('every docs page a source comment names exists, with the section it names', () => {
  const problems = sources.flatMap((file) =>
    docsPointersOf(readFileSync(file, 'utf8')).flatMap(({ line, target }) => {
      const why = broken(join(projectRoot, 'README.md'), target);
      return why ? [`${at(file, line)}: ${target}: ${why}`] : [];
    }),
  );
  expect(problems).toEqual([]);
});

test('no source comment points to a README section: they point to docs pages', () => {
  // The check's own files spell the form out.
  const own = new Set([join(projectRoot, 'test/docs/links.ts'), join(projectRoot, 'test/unit/docs-links.test.ts')]);
  const problems = sources
    .filter((file) => !own.has(file))
    .flatMap((file) => readmePointersOf(readFileSync(file, 'utf8')).map(({ line, target }) => `${at(file, line)}: ${target}`));
  expect(problems).toEqual([]);
});

test("anchors are GitHub's: punctuation dropped, spaces as hyphens, duplicates numbered", () => {
  expect(slug('Cluster access (`shared/kube`)')).toBe('cluster-access-sharedkube');
  expect(slug("The forwarder's image")).toBe('the-forwarders-image');
  expect(slug('KEP-238: Controller-Revision')).toBe('kep-238-controller-revision');
  expect(slug('Identity: each MapController acts as its own ServiceAccount')).toBe(
    'identity-each-mapcontroller-acts-as-its-own-serviceaccount',
  );
  expect([...anchorsOf('# A\n## Measured\n```\n# not a heading\n```\n### Measured\n')]).toEqual(['a', 'measured', 'measured-1']);
  expect(readmePointersOf('// as the docs say (README, "Deploying")\n// (README:\n// "Operating")\n')).toHaveLength(2);
});
