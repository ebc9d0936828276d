// The stamp of what the project builds and fetches into .cache (docs/contributing/test-beds.md#what-the-project-installs):
// the same in every clone and worktree of one commit, so that a cache they share is rebuilt only when an input changes.
import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { projectRoot } from '../../local/paths.ts';
import { fingerprint } from '../../local/process.ts';

test('a stamp names its inputs by their path in the project, not where the checkout is', async () => {
  const file = join(projectRoot, 'test', 'dynamodb', 'pom.xml');
  const expected = createHash('sha256')
    .update('test/dynamodb/pom.xml\0')
    .update(await readFile(file))
    .update('\0')
    .digest('hex');
  expect(await fingerprint([file])).toBe(expected);
});
