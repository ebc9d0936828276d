// What the tests fetch at run time is checked against pinned hashes (docs/contributing/test-beds.md#what-the-project-installs):
// PyPI files against the requirements' sha256s, Maven jars against their checksums, Go modules against go.sum and
// the checksum database.
import { readFileSync } from 'node:fs';
import { MAVEN_FETCH_FLAGS, goBuildEnv } from '../../local/process.ts';
import { PIP_INSTALL_FLAGS } from '../../local/python.ts';

const requirementFiles = ['test/cfn-lint/requirements.txt', 'test/sam/requirements.txt', 'test/aws-emulator/requirements.txt'];

/** Each requirement of a pip requirements file with the hashes it pins (continuation lines joined). */
function requirements(file: string): { spec: string; hashes: string[] }[] {
  const text = readFileSync(file, 'utf8')
    .split('\n')
    .filter((line) => !line.trimStart().startsWith('#'))
    .join('\n')
    .replace(/\\\n/g, ' ');
  return text
    .split('\n')
    .map((line) => line.trim())
    .filter(Boolean)
    .map((line) => ({
      spec: line.split(/\s+/)[0] ?? '',
      hashes: [...line.matchAll(/--hash=sha256:([0-9a-f]{64})/g)].map((m) => m[1] ?? ''),
    }));
}

test.each(requirementFiles)('every requirement of %s is pinned with == and at least one sha256', (file) => {
  const reqs = requirements(file);
  expect(reqs.length).toBeGreaterThan(0);
  expect(reqs.filter((r) => !/^[A-Za-z0-9_.-]+(\[[A-Za-z0-9_,.-]+\])?==\S+$/.test(r.spec) || r.hashes.length === 0)).toEqual([]);
});

test('pip installs only hashed wheels', () => {
  expect(PIP_INSTALL_FLAGS).toEqual(expect.arrayContaining(['--require-hashes', '--only-binary=:all:']));
});

test('Maven fails on a checksum mismatch rather than warning', () => {
  expect(MAVEN_FETCH_FLAGS).toContain('-C');
});

test('Go builds check modules go.sum does not list against the checksum database', () => {
  expect(goBuildEnv().GOSUMDB).toBe('sum.golang.org');
  expect(goBuildEnv().GOFLAGS).toBe('-mod=readonly');
});
