import { createTypeScriptImportResolver } from 'eslint-import-resolver-typescript';
import { importX } from 'eslint-plugin-import-x';
import tseslint from 'typescript-eslint';

/** What each layer may not import: the arrows of the house run routes -> domain -> db/storage/queues, never back. */
const BULLMQ = {
  name: 'bullmq',
  message:
    'Only src/platform/queues/, src/platform/job-definition.ts, src/runtime/workers.ts and jobs/ use BullMQ: add or read jobs through a src/platform/queues/<queue>.ts function.',
};
const HTTP = ['fastify', 'fastify-type-provider-zod', '@fastify/*', '@bull-board/*'];
const PG = ['pg', 'pg-*'];

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', 'data/**', 'tools/**'] },
  ...tseslint.configs.recommended,
  {
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      'no-console': ['error', { allow: ['error', 'warn'] }],
    },
  },
  {
    // No import cycles: a module's dependencies load before it, and a reader can follow the arrows one way. Type-only
    // imports are left out (they vanish at compile time).
    files: ['**/*.ts'],
    plugins: { 'import-x': importX },
    settings: {
      'import-x/parsers': { '@typescript-eslint/parser': ['.ts'] },
      'import-x/resolver-next': [createTypeScriptImportResolver({ project: './tsconfig.json' })],
    },
    rules: { 'import-x/no-cycle': 'error' },
  },
  {
    files: ['src/cli.ts', 'scripts/**', 'bench/**', 'src/cli/**'],
    rules: { 'no-console': 'off' },
  },
  {
    // Domain modules know nothing of HTTP nor of the queue library.
    files: ['src/**/*.ts'],
    ignores: [
      'src/platform/queues/**',
      'src/platform/job-definition.ts',
      'src/runtime/workers.ts',
      'src/app.ts',
      'src/runtime/run.ts',
      'src/platform/http/**',
      'src/routes/**',
    ],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          paths: [BULLMQ],
          patterns: [
            {
              group: HTTP,
              message:
                'Domain modules know nothing of HTTP: only src/app.ts, src/runtime/run.ts, src/platform/http/ and src/routes/ use Fastify.',
            },
            {
              group: ['**/http/*', '**/routes/*'],
              message:
                'Domain modules know nothing of HTTP: the arrows run routes -> domain, so a domain module never imports src/platform/http/ or src/routes/.',
            },
          ],
        },
      ],
    },
  },
  {
    // A job takes its payload and calls a domain function: no SQL client, no HTTP, no route or HTTP helper.
    files: ['jobs/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            { group: PG, message: 'Jobs call domain modules; SQL lives beside the module that owns the table.' },
            { group: HTTP, message: 'Jobs know nothing of HTTP.' },
            {
              group: ['**/src/platform/http/*', '**/src/routes/*'],
              message: 'Jobs call domain modules, not the HTTP layer.',
            },
          ],
        },
      ],
    },
  },
  {
    files: ['src/app.ts', 'src/runtime/run.ts', 'src/platform/http/**/*.ts'],
    rules: { 'no-restricted-imports': ['error', { paths: [BULLMQ] }] },
  },
  {
    // Routes parse, call a domain function and answer: no SQL client, no queue library.
    files: ['src/routes/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          paths: [BULLMQ],
          patterns: [
            { group: PG, message: 'Routes call domain modules; SQL lives beside the module that owns the table.' },
          ],
        },
      ],
    },
  },
);
