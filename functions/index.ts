// The function registry: the functions every deployment has (the heartbeat, the router, the ingest URL) and each
// controller's (functions/controllers.ts). The CDK construct and the local runtime read this list.
import { gvrString, type GVR } from '../shared/kube/index.ts';
import { controllers, controllerSources, definitionResources, forgetControllers } from './controllers.ts';
import { storageController } from './storage/controller.ts';
import type { FunctionSpec } from './spec.ts';

export const functions: FunctionSpec[] = [
  {
    name: 'heartbeat',
    description: 'Records, for each cluster, whether its apiserver answered and which version it runs',
    entry: 'functions/heartbeat/handler.ts',
    schedule: { everyMinutes: 1 },
    table: ['dynamodb:GetItem', 'dynamodb:PutItem'],
    clusterAccess: 'controllers',
    timeoutSeconds: 30,
  },
  {
    name: 'router',
    description: 'Turns watch events into sync requests for the controllers that must reconcile (ControllerRef rules)',
    entry: 'functions/router/handler.ts',
    events: {
      resources: async (cluster, kube) => {
        const all = (await Promise.all(controllerSources.map((s) => s.watches(cluster, kube)))).flat();
        return [...new Map<string, GVR>(all.map((r) => [gvrString(r), r])).values()];
      },
      definitions: definitionResources,
      forget: forgetControllers,
      // The parents (and the definitions, parents of their own); children and inputs route by metadata alone.
      wholeObjects: async (cluster, kube) => [
        ...definitionResources,
        ...(await Promise.all(controllerSources.map((s) => s.kinds(cluster, kube)))).flat().map((k) => k.resource),
      ],
    },
    // The targets of the controllers it routes for (history, storage, map); never truncate or migrator.
    sends: controllerSources.map((s) => s.target),
    clusterAccess: 'controllers',
    timeoutSeconds: 60,
  },
  ...controllers.flatMap((c) => c.functions),
  {
    name: 'ingest',
    description: 'Takes watch events over HTTPS (our envelopes, Knative ApiServerSource events) and queues them for the router',
    entry: 'functions/ingest/handler.ts',
    functionUrl: true,
    clusterAccess: 'none',
    timeoutSeconds: 30,
  },
];

/** The functions of the storage migration feature, which act on every resource of a cluster. */
export const STORAGE_FUNCTIONS = storageController.functions.map((f) => f.name);
