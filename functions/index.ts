import type { FunctionSpec } from './spec.ts';

export const functions: FunctionSpec[] = [
  {
    name: 'heartbeat',
    description: 'Records, for each cluster, whether its apiserver answered and which version it runs',
    entry: 'functions/heartbeat/handler.ts',
    load: () => import('./heartbeat/handler.ts'),
    schedule: { everyMinutes: 1 },
    timeoutSeconds: 30,
  },
];
