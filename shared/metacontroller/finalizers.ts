// A definition's finalizer on an object: the list it writes, whichever kind of definition writes it
// (functions/metacontroller/finalizers.ts writes it).

/** The finalizer list with `name` added (`want`) or removed, or undefined when it already is so. */
export function finalizersWith(finalizers: readonly string[] | undefined, name: string, want: boolean): string[] | undefined {
  const list = finalizers ?? [];
  if (list.includes(name) === want) return undefined;
  return want ? [...list, name] : list.filter((f) => f !== name);
}
