// The one queue MapController, CompositeController and DecoratorController parents share, and the one function that
// serves it (docs/contributing/layout.md#one-function-for-the-metacontroller-style-controllers).

/** The sync target (queue) of every Metacontroller-style parent. */
export const METACONTROLLER_TARGET = 'map';
