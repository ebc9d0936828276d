// SnapshotSchedule's map and tombstone hooks (the example of docs/controllers/mapcontroller.md#writing-a-hook-as-a-lambda-function), as AWS Lambda handlers: the whole of the
// controller's own logic. Outrigger calls `map` once per matching PVC with the snapshots already taken for it,
// and `tombstone` with the snapshots of a PVC that is gone. Both are pure functions of the request and the
// clock: one snapshot per interval, named after the PVC and the interval's start, kept until its TTL.
import type { MapHookRequest, TombstoneHookRequest } from '../../shared/map/api.ts';
import type { KubeObject } from '../../shared/kube/index.ts';

export const TAKEN_AT = 'snapshot.outrigger.dev/taken-at';
export const PVC_LABEL = 'snapshot.outrigger.dev/pvc';

interface ScheduleSpec {
  snapshotInterval: string;
  snapshotTTL: string;
  volumeSnapshotClassName?: string;
}

const UNITS: Record<string, number> = { s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** `30s`, `15m`, `6h`, `10d`. */
export function parseDuration(text: string): number {
  const m = /^(\d+)([smhd])$/.exec(text);
  if (!m || Number(m[1]) === 0)
    throw new Error(`not a duration: ${JSON.stringify(text)} (expected a positive number and one of s, m, h, d)`);
  return Number(m[1]) * UNITS[m[2]!]!;
}

/** A PVC name cut to `length`, ending as names and label values must: with a letter or digit, not `-` or `.`. */
const cut = (name: string, length: number) => name.slice(0, length).replace(/[-.]+$/, '');

function snapshot(parent: KubeObject, pvc: string, takenAt: number): KubeObject {
  const spec = parent.spec as ScheduleSpec;
  return {
    apiVersion: 'snapshot.storage.k8s.io/v1',
    kind: 'VolumeSnapshot',
    metadata: {
      // One name per PVC and interval: a repeated call answers the same snapshot, never a second one.
      name: `${cut(pvc, 200)}-${Math.floor(takenAt / 1000)}`,
      labels: { [PVC_LABEL]: cut(pvc, 63) },
      annotations: { [TAKEN_AT]: new Date(takenAt).toISOString() },
    },
    spec: {
      source: { persistentVolumeClaimName: pvc },
      ...(spec.volumeSnapshotClassName ? { volumeSnapshotClassName: spec.volumeSnapshotClassName } : {}),
    },
  };
}

const flatten = (outputs: MapHookRequest['outputs']): KubeObject[] => Object.values(outputs).flatMap((byName) => Object.values(byName));
const takenAt = (o: KubeObject): number => Date.parse(o.metadata.annotations?.[TAKEN_AT] ?? '') || 0;

/** The snapshots one PVC should have now: the unexpired ones, and one for the current interval. */
export function mapSnapshots(req: MapHookRequest, now = Date.now()): { outputs: KubeObject[] } {
  const spec = req.parent.spec as ScheduleSpec;
  const interval = parseDuration(spec.snapshotInterval);
  const ttl = parseDuration(spec.snapshotTTL);
  const pvc = req.input.metadata.name ?? '';
  const times = new Set(
    flatten(req.outputs)
      .map(takenAt)
      .filter((t) => t + ttl > now),
  );
  times.add(Math.floor(now / interval) * interval);
  return { outputs: [...times].sort((a, b) => a - b).map((t) => snapshot(req.parent, pvc, t)) };
}

/** Snapshots of a PVC that is gone: keep those within their TTL (they may be all that is left of it). */
export function keepSnapshots(req: TombstoneHookRequest, now = Date.now()): { outputs: KubeObject[] } {
  const ttl = parseDuration((req.parent.spec as ScheduleSpec).snapshotTTL);
  return { outputs: flatten(req.outputs).filter((o) => takenAt(o) + ttl > now) };
}

export const map = async (event: MapHookRequest) => mapSnapshots(event);
export const tombstone = async (event: TombstoneHookRequest) => keepSnapshots(event);
