// CompositeController and DecoratorController (docs/controllers/compositecontroller.md): Metacontroller's APIs,
// served the way a MapController is. No function of their own: their parents' requests go to the map function's
// queue and are served there (functions/composite/serve.ts), and the map-resync function resyncs them.
import { metacontrollerOn } from '../../shared/clusters.ts';
import type { Controller } from '../spec.ts';
import { compositeControllers, compositeSource, decoratorControllers } from './controllers.ts';

export const compositeController: Controller = {
  name: 'composite',
  source: compositeSource,
  runsIn: metacontrollerOn,
  definitions: [compositeControllers, decoratorControllers],
  functions: [],
};
