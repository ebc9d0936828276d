// Two projects: unit tests need nothing running; integration tests get a real kube-apiserver (with etcd) and
// DynamoDB Local from the global setup. Both run TypeScript through swc (type checking is `npm run typecheck`).
const transform = {
  '^.+\\.ts$': ['@swc/jest', { jsc: { parser: { syntax: 'typescript' }, target: 'es2024' }, module: { type: 'es6' } }],
};
const common = { transform, extensionsToTreatAsEsm: ['.ts'], testEnvironment: 'node', setupFiles: ['<rootDir>/test/quiet-metrics.js'] };

export default {
  projects: [
    {
      ...common,
      displayName: 'unit',
      testMatch: ['<rootDir>/test/unit/**/*.test.ts'],
      testEnvironmentOptions: {
        // The unit files that keep a core busy for long (CDK synthesis, SAM CLI, cfn-lint, bundles): they run
        // beside the integration files that have the bed to themselves, whose other worker would otherwise wait
        // on the bed's lock (test/alone-first-sequencer.js).
        cpuBound: [
          'test/unit/cfn-lint.test.ts',
          'test/unit/sam.test.ts',
          'test/unit/invoke.test.ts',
          'test/unit/stack.test.ts',
          'test/unit/sam-env.test.ts',
          'test/unit/outrigger-construct.test.ts',
        ],
      },
    },
    {
      ...common,
      displayName: 'integration',
      testMatch: ['<rootDir>/test/integration/**/*.test.ts'],
      globalSetup: '<rootDir>/test/testbed/global-setup.ts',
      globalTeardown: '<rootDir>/test/testbed/global-teardown.ts',
      // Files share the bed, two at once; those listed here have it to themselves
      // (docs/contributing/test-beds.md#files-in-parallel).
      testEnvironment: '<rootDir>/test/shared-bed-environment.js',
      testEnvironmentOptions: {
        alone: [
          // Its local runtime's history-resync syncs every policy's targets in every namespace: other files'
          // StatefulSets would get revisions written by a cluster of its own.
          'test/integration/history-policies.test.ts',
          // Its local runtime's map-resync queues every MapController's parents to its map function, which would
          // call other files' hooks (they count their calls).
          'test/integration/map.test.ts',
          // Its left-alone MapController must see no deployment but its own: another file's runtime, serving every
          // MapController, would write its Ready condition.
          'test/integration/map-target-selector.test.ts',
          // Its runtime, kept to one namespace, serves every definition: other files' definitions' cluster-scoped
          // writes (Outrigger's finalizer on a definition) are refused there and retried, so it would not settle.
          'test/integration/runtime-namespace.test.ts',
        ],
        // The files that need a Go program the global setup builds ahead of need, at a low priority, while the
        // others run (test/testbed/prebuild.ts): last, so that a cold run's builds are done or nearly by then.
        // The files that keep a core busy for long and use no part of the bed (they take no lock on it): they run
        // beside the files that have the bed to themselves, as the unit project's cpuBound files do.
        cpuBound: [
          // The deploy rehearsal on moto's server: two synths with every function bundled, and the CDK CLI.
          'test/integration/deploy.test.ts',
        ],
        late: [
          'test/integration/forwarder-chart.test.ts', // Helm
          'test/integration/composite-realistic.test.ts', // kwok: a CompositeController's Deployments on the node bed
          'test/integration/forwarder-image.test.ts', // crane
          'test/integration/composite-nodes.test.ts', // kwok
          'test/integration/map-jobs.test.ts', // kwok
          'test/integration/nodes.test.ts', // kwok, LWS's manager
          'test/integration/lambda-image.test.ts', // the base images
          'test/integration/sam-invoke.test.ts', // the Lambda base image
          'test/integration/forwarder-container.test.ts', // the base images, the forwarder's image
          'test/integration/lambda-containers.test.ts', // the Lambda base image
        ],
      },
    },
  ],
  // Most integration files wait on servers (the apiserver, DynamoDB Local, child processes), so two workers
  // keep both cores busy on this 2-core machine where jest would otherwise run one file at a time.
  maxWorkers: 2,
  testSequencer: '<rootDir>/test/alone-first-sequencer.js',
  testTimeout: 60_000,
  reporters: ['default', '<rootDir>/test/summary-reporter.js'],
};
