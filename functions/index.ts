import { gvrString } from '../shared/kube/index.ts';
import { controllerSources } from './controllers.ts';
import type { FunctionSpec } from './spec.ts';

const watched = new Map(controllerSources.flatMap((s) => s.watches).map((r) => [gvrString(r), r]));

export const functions: FunctionSpec[] = [
  {
    name: 'heartbeat',
    description: 'Records, for each cluster, whether its apiserver answered and which version it runs',
    entry: 'functions/heartbeat/handler.ts',
    load: () => import('./heartbeat/handler.ts'),
    schedule: { everyMinutes: 1 },
    timeoutSeconds: 30,
  },
  {
    name: 'router',
    description: 'Turns watch events into sync requests for the controllers that must reconcile (ControllerRef rules)',
    entry: 'functions/router/handler.ts',
    load: () => import('./router/handler.ts'),
    events: { resources: [...watched.values()] },
    timeoutSeconds: 60,
  },
];
