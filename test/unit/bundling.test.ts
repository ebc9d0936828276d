// The functions are built only with the esbuild package.json pins (docs/getting-started/deploy.md#in-a-cdk-app-of-your-own).
import { checkEsbuild } from '../../infra/bundling.ts';

test('synth refuses to bundle without the pinned esbuild, rather than fall back to Docker with an unpinned one', () => {
  expect(() => checkEsbuild({ pinned: '0.28.2', installed: undefined })).toThrow(/esbuild 0\.28\.2, installed beside it.*found none/);
  expect(() => checkEsbuild({ pinned: '0.28.2', installed: '0.29.0' })).toThrow(/found esbuild 0\.29\.0/);
});

test('the esbuild installed here is the pinned one', () => {
  expect(() => checkEsbuild()).not.toThrow();
});
