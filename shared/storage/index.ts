// Automated storage version migration (docs/controllers/storage-migration.md): the API shapes and the trigger's pure decisions.
export * from './api.ts';
export * from './trigger.ts';
export { storageVersionHash } from './hash.ts';
export * from './migrator.ts';
export * from './control-plane.ts';
