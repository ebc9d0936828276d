// Automated storage version migration (README, "Storage version migration"): the API shapes and the trigger's pure decisions.
export * from './api.ts';
export * from './trigger.ts';
export { storageVersionHash } from './hash.ts';
export * from './migrator.ts';
export * from './control-plane.ts';
