// One MapController sync pass (docs/controllers/mapcontroller.md), the decisions only: which objects are inputs, which outputs belong to
// which map key, whether a hook's answer may be applied, what to create, update and delete, and the parent's
// aggregated status. The shell (functions/map) lists, calls hooks and writes.
export * from './inputs.ts';
export * from './outputs.ts';
export * from './managed-fields.ts';
export * from './status.ts';
export * from './answers.ts';
export * from './finalize.ts';
export * from './budget.ts';
export * from './outcome.ts';
