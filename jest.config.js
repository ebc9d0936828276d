// Two projects: unit tests need nothing running; integration tests get a real kube-apiserver (with etcd) and
// DynamoDB Local from the global setup. Both run TypeScript through swc (type checking is `npm run typecheck`).
const transform = {
  '^.+\\.ts$': ['@swc/jest', { jsc: { parser: { syntax: 'typescript' }, target: 'es2024' }, module: { type: 'es6' } }],
};
const common = { transform, extensionsToTreatAsEsm: ['.ts'], testEnvironment: 'node', setupFiles: ['<rootDir>/test/quiet-metrics.js'] };

export default {
  projects: [
    { ...common, displayName: 'unit', testMatch: ['<rootDir>/test/unit/**/*.test.ts'] },
    {
      ...common,
      displayName: 'integration',
      testMatch: ['<rootDir>/test/integration/**/*.test.ts'],
      globalSetup: '<rootDir>/test/testbed/global-setup.ts',
      globalTeardown: '<rootDir>/test/testbed/global-teardown.ts',
    },
  ],
  testTimeout: 60_000,
  reporters: ['default', '<rootDir>/test/summary-reporter.js'],
};
