import tseslint from 'typescript-eslint';

// The I/O adapters of shared/: the only modules there that may reach a network, a disk, a process or a cloud SDK
// (docs/contributing/layout.md#the-functional-core-and-its-adapters). Everything else in shared/ is the pure core.
const SHARED_ADAPTERS = [
  'shared/kube/**',
  'shared/state/**',
  'shared/lambda/**',
  'shared/hooks/**',
  'shared/events/index.ts',
  'shared/ownership/claim-shell.ts',
  'shared/history/create-revision.ts',
  'shared/ownership/resolver.ts',
  'shared/ownership/index.ts',
  'shared/clusters.ts',
];

// The controllers' folders under functions/ (docs/contributing/layout.md): none imports another's; what two share
// lives in a shared layer (functions/metacontroller/ for the Metacontroller-style kinds, shared/ for the pure core).
const CONTROLLER_FOLDERS = ['map', 'composite', 'history', 'storage'];

export default tseslint.config(
  { ignores: ['node_modules/', 'cdk.out/', '.cache/', 'test/cluster/', '.outrigger/'] },
  ...tseslint.configs.recommended,
  {
    languageOptions: {
      parserOptions: { projectService: { allowDefaultProject: ['*.js', 'test/*.js'] }, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      // `any` needs a comment saying why; the disable comment is where that reason goes.
      '@typescript-eslint/no-explicit-any': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/consistent-type-imports': 'error',
      // A promise nobody awaits loses its error (an unhandled rejection ends a Lambda runtime's process).
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': 'error',
      // A new outcome, phase or mode must be handled wherever one is switched on.
      '@typescript-eslint/switch-exhaustiveness-check': ['error', { considerDefaultExhaustiveForUnions: true }],
      // Warnings, not errors: a nudge to split, read at review.
      'max-lines': ['warn', { max: 400, skipBlankLines: true, skipComments: true }],
      'max-params': ['warn', { max: 5 }],
    },
  },
  {
    // The pure core of shared/ decides; it does no I/O, so it runs in unit and property tests as it is.
    files: ['shared/**/*.ts'],
    ignores: SHARED_ADAPTERS,
    rules: {
      '@typescript-eslint/no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              regex:
                '^(node:)?(fs|fs/promises|http|https|http2|net|tls|dgram|dns|dns/promises|child_process|worker_threads|cluster|timers/promises)$',
              message:
                'The pure modules of shared/ do no I/O: do it in a shell (functions/) or an adapter (shared/kube, shared/state, ...).',
            },
            {
              regex: '^(@aws-sdk/|@smithy/|@kubernetes/client-node|undici|@aws-lambda-powertools/|@middy/|p-retry$|p-limit$)',
              allowTypeImports: true,
              message:
                'The pure modules of shared/ do no I/O: do it in a shell (functions/) or an adapter (shared/kube, shared/state, ...).',
            },
            {
              // The adapters' modules, but for the pure ones kept beside them (resources, errors, the sync request,
              // the webhook signatures, which receivers copy: node:crypto only; where a webhook is sent, which imports
              // nothing).
              regex:
                '/(kube/(?!(resource|errors)\\.ts$)[^/]+|state/[^/]+|lambda/(?!sync-request\\.ts$)[^/]+|hooks/(?!(signature|target)\\.ts$)[^/]+|events/index\\.ts|ownership/(claim-shell|resolver|index)\\.ts|clusters\\.ts)$',
              allowTypeImports: true,
              message: 'An I/O adapter: the pure modules of shared/ may import its types only.',
            },
          ],
        },
      ],
    },
  },
  ...CONTROLLER_FOLDERS.map((folder) => ({
    files: [`functions/${folder}/**/*.ts`],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              regex: `^\\.\\./(${CONTROLLER_FOLDERS.filter((f) => f !== folder).join('|')})/`,
              message:
                "A controller's folder imports no other controller's: move what both use to a shared layer (functions/metacontroller/, shared/).",
            },
          ],
        },
      ],
    },
  })),
);
