// The history another controller keeps for a parent (kube-controller-manager's StatefulSet and DaemonSet
// controllers; docs/controllers/history.md#coexistence), for `outrigger history` to show read-only: Outrigger never numbers,
// truncates or rolls back to these revisions.
import { Resources, parseApiVersion, type KubeClient, type KubeObject } from '../shared/kube/index.ts';
import { fieldAt } from '../shared/history/data.ts';
import { foreignRevisions, sortRevisions, type ControllerRevision } from '../shared/history/revisions.ts';
import { compileSelector, selectorString, type LabelSelector } from '../shared/ownership/index.ts';

/** Found by the parent's own selector, as that controller labels its revisions; none without a selector. */
export async function foreignHistory(kube: KubeClient, parent: KubeObject): Promise<ControllerRevision[]> {
  const labelSelector = selectorString(compileSelector(fieldAt(parent, 'spec.selector') as LabelSelector | undefined));
  if (labelSelector === undefined || !parent.kind) return [];
  const listed = await kube.list<ControllerRevision>(Resources.controllerRevisions, {
    namespace: parent.metadata.namespace,
    labelSelector,
  });
  return sortRevisions(
    foreignRevisions(listed.items, { group: parseApiVersion(parent.apiVersion ?? '').group, kind: parent.kind }, parent.metadata.uid),
  );
}

/** A table of them under a heading that says whose they are, or nothing. */
export function foreignTable(revisions: readonly ControllerRevision[], age: (since: string | undefined) => string): string {
  if (revisions.length === 0) return '';
  const rows = [
    ['REVISION', 'NAME', 'AGE'],
    ...revisions.map((r) => [String(r.revision), r.metadata.name ?? '', age(r.metadata.creationTimestamp ?? undefined)]),
  ];
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((row) => row[i]!.length)));
  return `\nkept by another controller (read-only; Outrigger does not number, truncate or roll back to these):\n${rows
    .map((row) =>
      row
        .map((c, i) => c.padEnd(widths[i]!))
        .join('  ')
        .trimEnd(),
    )
    .join('\n')}\n`;
}
