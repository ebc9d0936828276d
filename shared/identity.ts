// Who may use a ServiceAccount a definition names, and which definition holds a kind (docs/operations/security.md#serviceaccounts-a-definition-names):
// pure decisions, read by functions/identity.ts and the MapController and RevisionPolicy sets.
import type { KubeObject } from './kube/resource.ts';

/**
 * The ServiceAccount annotation naming the definitions that may act as it: `mapcontroller/<name>` and
 * `revisionpolicy/<name>`, comma-separated; `mapcontroller/*` names every MapController.
 */
export const ALLOWED_CONTROLLERS_ANNOTATION = 'outrigger.dev/allowed-controllers';

/** A definition that acts as a ServiceAccount. */
export interface Consumer {
  kind: 'MapController' | 'RevisionPolicy' | 'CompositeController' | 'DecoratorController';
  name: string;
}

/** `mapcontroller/<name>`: how the annotation names a definition. */
export function consumerRef(c: Consumer): string {
  return `${c.kind.toLowerCase()}/${c.name}`;
}

/** Whether the account's annotations name the definition (or every definition of its kind). */
export function accountConsents(annotations: Readonly<Record<string, string>> | undefined, c: Consumer): boolean {
  const listed = (annotations?.[ALLOWED_CONTROLLERS_ANNOTATION] ?? '')
    .split(',')
    .map((e) => e.trim())
    .filter(Boolean);
  const kind = c.kind.toLowerCase();
  return listed.some((entry) => {
    const slash = entry.indexOf('/');
    if (slash < 0) return false;
    const [k, n] = [entry.slice(0, slash).toLowerCase(), entry.slice(slash + 1)];
    return k === kind && (n === c.name || n === '*');
  });
}

/**
 * Definitions in the order they hold a kind: the one created first, then by uid (creationTimestamp has whole
 * seconds). A name decides nothing, so no definition named later can take a kind from one already running.
 */
export function firstHolderFirst(a: KubeObject, b: KubeObject): number {
  const [ta, tb] = [Date.parse(a.metadata.creationTimestamp ?? ''), Date.parse(b.metadata.creationTimestamp ?? '')];
  const [ka, kb] = [Number.isNaN(ta) ? Infinity : ta, Number.isNaN(tb) ? Infinity : tb];
  if (ka !== kb) return ka < kb ? -1 : 1;
  const [ua, ub] = [a.metadata.uid ?? '', b.metadata.uid ?? ''];
  return ua < ub ? -1 : ua > ub ? 1 : 0;
}
