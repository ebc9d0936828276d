import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['node_modules/', 'cdk.out/', '.cache/', 'test/cluster/', '.outrigger/'] },
  ...tseslint.configs.recommended,
  {
    rules: {
      // `any` needs a comment saying why; the disable comment is where that reason goes.
      '@typescript-eslint/no-explicit-any': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/consistent-type-imports': 'error',
    },
  },
);
