// CompositeController and DecoratorController (docs/controllers/compositecontroller.md): Metacontroller's APIs,
// served the way a MapController is. Declared, not yet listed in functions/controllers.ts: a sync target of its
// own adds a queue and a dead-letter queue per cluster, and the stack with 10 EKS clusters would then hold 544
// resources, over CloudFormation's 500 (docs/controllers/compositecontroller.md#what-is-left).
import type { Controller } from '../spec.ts';
import { MAP_RETRY_RECEIVES } from '../../shared/map/plan/outcome.ts';
import { compositeControllers, compositeSource, decoratorControllers } from './controllers.ts';

export const compositeController: Controller = {
  name: 'composite',
  source: compositeSource,
  definitions: [compositeControllers, decoratorControllers],
  functions: [
    {
      name: 'composite',
      description: 'CompositeController and DecoratorController: calls the sync or finalize hook per parent; children, labels, status',
      entry: 'functions/composite/handler.ts',
      sync: { target: 'composite' },
      sends: ['composite'],
      // It consumes a failing parent's request itself after MAP_RETRY_RECEIVES receives.
      receives: MAP_RETRY_RECEIVES + 1,
      // Each parent's wake-up time (resyncAfterSeconds).
      table: ['dynamodb:GetItem', 'dynamodb:PutItem'],
      clusterAccess: 'controllers',
      callsHooks: true,
      timeoutSeconds: 300,
    },
    {
      name: 'composite-resync',
      description: 'CompositeController and DecoratorController: queues a sync of every parent once per resyncPeriodSeconds',
      entry: 'functions/composite-resync/handler.ts',
      schedule: { everyMinutes: 1 },
      sends: ['composite'],
      clusterAccess: 'controllers',
      timeoutSeconds: 60,
    },
  ],
};
