// A parent's conditions (Synced, Ready): one shape and one way to set one, for every kind of definition.

export interface Condition {
  type: string;
  status: 'True' | 'False' | 'Unknown';
  reason: string;
  message: string;
  lastTransitionTime: string;
  observedGeneration?: number | undefined;
}

/** The condition list with `next` set, keeping its transition time when its status did not change. */
export function setCondition(
  current: readonly Condition[] | undefined,
  next: Omit<Condition, 'lastTransitionTime'>,
  now: Date,
): Condition[] {
  const before = current?.find((c) => c.type === next.type);
  const lastTransitionTime = before && before.status === next.status ? before.lastTransitionTime : `${now.toISOString().slice(0, 19)}Z`;
  return [...(current ?? []).filter((c) => c.type !== next.type), { ...next, lastTransitionTime }];
}
